// Tests for train_resnet50's flag parsing: defaults, booleans, and a named error for each misuse.
#include "lib/run/train_cli.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "lib/config/flag_table.h"
#include "lib/device/cuda_device.h"
#include "lib/distributed/data_parallel.h"
#include "lib/report/report.h"
#include "tests/support/test_util.h"

namespace workload {
namespace {

ParsedArgs parse(std::vector<std::string> args) {
  args.insert(args.begin(), "train_resnet50");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_train_args(static_cast<int>(argv.size()), argv.data());
}

// Expects a UsageError (cxxopts' own errors included, which exit 2 as such) whose message contains
// `fragment`.
void expect_usage_error(const std::vector<std::string>& args, const std::string& fragment) {
  try {
    parse(args);
    FAIL() << "expected a usage error for " << ::testing::PrintToString(args);
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(TrainCliTest, PrintConfigIsAskedForAfterValidation) {
  EXPECT_FALSE(parse({"--data", "/x", "--device=cpu"}).print_config);
  const ParsedArgs p = parse({"--data", "/x", "--device=cpu", "--steps=5", "--print-config"});
  EXPECT_TRUE(p.print_config);
  EXPECT_EQ(p.config.steps, 5);
  expect_usage_error({"--device=cpu", "--print-config"}, "--data: required");
}

// The flags an --epochs run and its checkpoint directory take: named when they mean nothing or
// contradict, and a directory checked without being made.
TEST(TrainCliTest, EpochFlagsThatMeanNothingOrContradictAreNamed) {
  const std::vector<std::string> e = {"--data=/x", "--device=cpu", "--epochs=2"};
  const auto with = [&e](std::vector<std::string> more) {
    std::vector<std::string> a = e;
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  expect_usage_error(with({"--warmup=3"}), "--warmup: unused with --epochs");
  expect_usage_error(with({"--steps=4"}),
                     "--steps: with --epochs, counts the capture window's steps, "
                     "and needs --capture-at");
  EXPECT_EQ(parse(with({"--capture-at=5", "--steps=4"})).config.steps, 4);
  expect_usage_error(with({"--start-over"}), "--start-over: needs --checkpoint-dir");
  expect_usage_error(with({"--checkpoint-dir=/tmp/c", "--start-over", "--resume"}),
                     "--start-over: not with --resume");
  expect_usage_error({"--data=/x", "--device=cpu", "--start-over"},
                     "--start-over: only meaningful");
  expect_usage_error({"--data=/x", "--device=cpu", "--allow-nonfinite-loss=maybe"},
                     "--allow-nonfinite-loss");
  test_util::TempDir tmp;
  const std::string dir = (tmp.path() / "new" / "checkpoints").string();
  EXPECT_TRUE(parse(with({"--checkpoint-dir=" + dir, "--print-config"})).print_config);
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "new")) << "--print-config made the directory";
}

// The learning rate is the one default beyond the article's: a peak scaled with the global batch,
// a warm-up and a cosine (--lr-schedule constant --lr 0.1 is the article's).
TEST(TrainCliTest, TheLearningRateDefaultsToAScaledPeakWarmUpAndCosine) {
  const TrainConfig c = parse({"--data", "/x", "--device=cpu"}).config;
  EXPECT_FALSE(c.lr.has_value());
  EXPECT_EQ(c.lr_schedule, LrScheduleKind::kCosine);
  EXPECT_FALSE(c.lr_warmup_steps.has_value());
  EXPECT_EQ(c.label_smoothing, 0);
  const LrPlan run = plan_lr(c, 1);
  EXPECT_TRUE(run.scaled);
  EXPECT_DOUBLE_EQ(run.options.peak_lr, 0.1 * 128 / 256);
  EXPECT_EQ(run.options.total_steps, 11);  // 3 warm-up + 8 captured steps, each an optimizer step
  EXPECT_EQ(run_optimizer_steps(c), 11);
  EXPECT_EQ(run.options.warmup_steps, 3);      // 25% of 11, rounded
  EXPECT_EQ(plan_lr(c, 4).global_batch, 512);  // --batch-size x the ranks
  EXPECT_DOUBLE_EQ(plan_lr(c, 4).options.peak_lr, 0.2);
}

TEST(TrainCliTest, LearningRateFlags) {
  const TrainConfig article =
      parse({"--data=/x", "--device=cpu", "--lr-schedule=constant", "--lr=0.1"}).config;
  EXPECT_EQ(article.lr_schedule, LrScheduleKind::kConstant);
  EXPECT_EQ(article.lr, 0.1);
  const LrPlan run = plan_lr(article, 8);
  EXPECT_FALSE(run.scaled);
  EXPECT_EQ(run.options.peak_lr, 0.1);  // a given --lr is the peak, whatever the ranks
  EXPECT_EQ(run.options.warmup_steps, 0);
  EXPECT_TRUE(LrSchedule(run.options).constant());
  const TrainConfig c =
      parse({"--data=/x", "--device=cpu", "--lr-schedule", "step", "--lr-warmup-steps=4",
             "--steps=20", "--label-smoothing=0.1", "--batch-size=64"})
          .config;
  EXPECT_EQ(c.lr_schedule, LrScheduleKind::kStep);
  EXPECT_EQ(c.lr_warmup_steps, 4);
  EXPECT_DOUBLE_EQ(c.label_smoothing, 0.1);
  const LrPlan step = plan_lr(c, 1);
  EXPECT_DOUBLE_EQ(step.options.peak_lr, 0.025);
  EXPECT_EQ(step.options.total_steps, 23);
  EXPECT_EQ(step.options.milestones, (std::vector<std::int64_t>{10, 16, 20}));
  EXPECT_EQ(parse({"--data=/x", "--device=cpu", "--lr-warmup-steps=0"}).config.lr_warmup_steps, 0);
  expect_usage_error({"--data=/x", "--device=cpu", "--lr-schedule=linear"},
                     "--lr-schedule: expected constant|cosine|step, got 'linear'");
  expect_usage_error({"--data=/x", "--device=cpu", "--lr-warmup-steps=-1"},
                     "--lr-warmup-steps: expected an integer in [0, 1000000], got -1");
  expect_usage_error({"--data=/x", "--device=cpu", "--lr-warmup-steps=x"},
                     "--lr-warmup-steps: expected an integer, got 'x'");
  // Longer than the run: the schedule's own check, as a usage error naming the flag.
  expect_usage_error(
      {"--data=/x", "--device=cpu", "--warmup=2", "--steps=3", "--lr-warmup-steps=6"},
      "--lr-warmup-steps: expected an integer in [0, 5] (the run's optimizer steps), "
      "got 6");
  expect_usage_error({"--data=/x", "--device=cpu", "--label-smoothing=1.5"},
                     "--label-smoothing: expected a number in [0, 1], got 1.5");
  expect_usage_error({"--data=/x", "--device=cpu", "--label-smoothing=-0.1"}, "--label-smoothing");
  expect_usage_error({"--data=/x", "--device=cpu", "--lr=-0.1"}, "--lr: expected a number in");
  // --print-config's JSON: the flags as given, null where a rule decides (the report's lr_schedule
  // section holds the values used).
  const ParsedArgs p = parse({"--data=/x", "--device=cpu", "--print-config"});
  const nlohmann::ordered_json j = config_json(p.config);
  EXPECT_TRUE(j["lr"].is_null());
  EXPECT_TRUE(j["lr_warmup_steps"].is_null());
  EXPECT_EQ(j["lr_schedule"], "cosine");
  EXPECT_EQ(j["label_smoothing"], 0.0);
  const nlohmann::ordered_json given = config_json(article);
  EXPECT_EQ(given["lr"], 0.1);
  EXPECT_EQ(given["lr_schedule"], "constant");
}

TEST(TrainCliTest, DefaultsAreTheArticlesSettings) {
  const TrainConfig c = parse({"--data", "/x", "--device=cpu"}).config;
  EXPECT_EQ(c.loader.batch_size, 128);
  EXPECT_EQ(c.warmup, 3);
  EXPECT_EQ(c.steps, 8);
  EXPECT_EQ(c.loader.workers,
            static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency()))));
  EXPECT_EQ(c.loader.prefetch_factor, 2);
  EXPECT_TRUE(c.loader.pin_memory);
  EXPECT_EQ(c.loader.work_unit, data_pipeline::WorkUnit::kBatch);
  EXPECT_TRUE(c.reuse_iterator);
  EXPECT_EQ(c.loader.seed, 2026u);
  EXPECT_EQ(c.loader.transform.image_size, 224);
  EXPECT_FALSE(c.cudnn_benchmark);
  EXPECT_EQ(c.intra_op_threads, 1);
  EXPECT_DOUBLE_EQ(c.momentum, 0.9);
  EXPECT_DOUBLE_EQ(c.weight_decay, 1e-4);
  EXPECT_FALSE(c.synthetic);
  EXPECT_EQ(c.split, data_pipeline::Split::kTrain);
  EXPECT_EQ(c.device, Device::kCpu);
  EXPECT_EQ(c.precision, Precision::kFp32);
  EXPECT_EQ(c.mode, RunMode::kTrain);
}

// --cuda-graph's warm-up defaults to the 11 eager steps a data-parallel capture needs; a --warmup
// given is kept.
TEST(TrainCliTest, CudaGraphWarmupDefaultsToElevenSteps) {
  if (!cuda_available()) GTEST_SKIP() << "--cuda-graph needs --device cuda, refused without one";
  EXPECT_EQ(parse({"--data=/x", "--device=cuda", "--cuda-graph"}).config.warmup, kDdpGraphWarmup);
  EXPECT_EQ(kDdpGraphWarmup, 11);
  EXPECT_EQ(parse({"--data=/x", "--device=cuda", "--cuda-graph", "--warmup=2"}).config.warmup, 2);
  EXPECT_EQ(parse({"--data=/x", "--device=cuda"}).config.warmup, 3);
}

TEST(TrainCliTest, BooleansAcceptBareAndExplicitValues) {
  EXPECT_FALSE(parse({"--data=/x", "--device=cpu", "--pin-memory=false"}).config.loader.pin_memory);
  EXPECT_FALSE(
      parse({"--data=/x", "--device=cpu", "--reuse-iterator=false"}).config.reuse_iterator);
  EXPECT_TRUE(parse({"--data=/x", "--device=cpu", "--cudnn-benchmark"}).config.cudnn_benchmark);
  EXPECT_TRUE(parse({"--data=/x", "--device=cpu", "--synthetic=1"}).config.synthetic);
  expect_usage_error({"--data=/x", "--device=cpu", "--pin-memory=maybe"}, "--pin-memory");
}

TEST(TrainCliTest, ValuesAreParsed) {
  const TrainConfig c =
      parse({"--data=/d", "--device=cpu", "--batch-size=4", "--workers=0", "--prefetch-factor=3",
             "--work-unit=sample", "--seed=7", "--image-size=64", "--steps=2", "--warmup=0",
             "--lr=0.5", "--split=test", "--report=r.json", "--on-bad-image=skip"})
          .config;
  EXPECT_EQ(c.loader.batch_size, 4);
  EXPECT_EQ(c.loader.workers, 0);
  EXPECT_EQ(c.loader.prefetch_factor, 3);
  EXPECT_EQ(c.loader.work_unit, data_pipeline::WorkUnit::kSample);
  EXPECT_EQ(c.loader.seed, 7u);
  EXPECT_EQ(c.loader.transform.image_size, 64);
  EXPECT_EQ(c.steps, 2);
  EXPECT_EQ(c.warmup, 0);
  EXPECT_EQ(c.lr, 0.5);
  EXPECT_EQ(c.split, data_pipeline::Split::kTest);
  EXPECT_EQ(c.report, "r.json");
  EXPECT_EQ(c.loader.on_bad_image, data_pipeline::BadImagePolicy::kSkip);
}

TEST(TrainCliTest, EveryOutOfRangeNumberNamesItsFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--batch-size=0", "--batch-size"},
      {"--batch-size=-3", "--batch-size"},
      {"--batch-size=abc", "--batch-size"},
      {"--steps=0", "--steps"},
      {"--steps=-1", "--steps"},
      {"--warmup=-1", "--warmup"},
      {"--prefetch-factor=0", "--prefetch-factor"},
      {"--workers=-1", "--workers"},
      {"--image-size=16", "--image-size"},
      {"--intra-op-threads=0", "--intra-op-threads"},
      {"--lr=-1", "--lr"},
      {"--momentum=2", "--momentum"},
      {"--seed=-5", "--seed"},
      {"--lr=nan", "--lr"},
      {"--work-unit=pixel", "--work-unit"},
      {"--split=val", "--split"},
      {"--device=tpu", "--device"},
      {"--on-bad-image=ignore", "--on-bad-image"},
      {"--report=", "--report"}};
  for (const auto& [arg, flag] : cases) {
    expect_usage_error({"--data=/x", "--device=cpu", arg}, flag);
  }
}

TEST(TrainCliTest, UnknownFlagsMissingValuesAndStrayArguments) {
  expect_usage_error({"--data=/x", "--device=cpu", "--bogus=1"}, "bogus");
  expect_usage_error({"--device=cpu", "--data"}, "data");
  expect_usage_error({"--data=/x", "--device=cpu", "stray"}, "stray");
  expect_usage_error({"--device=cpu"}, "--data");
}

TEST(TrainCliTest, CudaWithoutAGpuIsAClearUsageError) {
#if !defined(WORKLOAD_TORCH_CUDA)
  expect_usage_error({"--data=/x", "--device=cuda"}, "no CUDA device");
#else
  GTEST_SKIP() << "CUDA build";
#endif
}

TEST(TrainCliTest, ExperimentFlags) {
  const TrainConfig c =
      parse({"--data=/x", "--device=cpu", "--host-dtype=uint8", "--nvtx-detail=layers",
             "--mode=forward", "--forward-bn=train", "--sync-every-step"})
          .config;
  EXPECT_EQ(c.loader.transform.dtype, data_pipeline::HostDType::kUInt8);
  EXPECT_EQ(c.nvtx_detail, NvtxDetail::kLayers);
  EXPECT_EQ(c.mode, RunMode::kForward);
  EXPECT_EQ(c.forward_bn, ForwardBn::kTrain);
  EXPECT_TRUE(c.sync_every_step);
  EXPECT_EQ(parse({"--data=/x", "--device=cpu"}).config.precision, Precision::kFp32);
  expect_usage_error({"--data=/x", "--device=cpu", "--precision=bf16"}, "CUDA only");
  expect_usage_error({"--data=/x", "--device=cpu", "--precision=fp8"}, "--precision");
  expect_usage_error({"--data=/x", "--device=cpu", "--host-dtype=int8"}, "--host-dtype");
  expect_usage_error({"--data=/x", "--device=cpu", "--nvtx-detail=kernels"}, "--nvtx-detail");
  expect_usage_error({"--data=/x", "--device=cpu", "--mode=eval"}, "--mode");
  expect_usage_error({"--data=/x", "--device=cpu", "--forward-bn=train"}, "--mode forward");
  expect_usage_error({"--data=/x", "--device=cpu", "--torch-profiler-trace=/no/such/dir/t.json"},
                     "--torch-profiler-trace");
  EXPECT_EQ(parse({"--data=/x", "--device=cpu"}).config.loader.decode,
            data_pipeline::DecodeDevice::kCpu);
  expect_usage_error({"--data=/x", "--device=cpu", "--decode=gpu"}, "needs --device cuda");
  expect_usage_error({"--data=/x", "--device=cpu", "--decode=npu"}, "--decode");
  const TrainConfig stalls =
      parse({"--data=/x", "--device=cpu", "--steps=5", "--inject-stall=forward@1:20",
             "--inject-stall", "zero_grad@4:2.5"})
          .config;
  ASSERT_EQ(stalls.inject_stall.size(), 2u);
  EXPECT_EQ(stalls.inject_stall[1], (InjectedStall{"zero_grad", 4, 2.5}));
  expect_usage_error({"--data=/x", "--device=cpu", "--inject-stall=forward:3"},
                     "--inject-stall: expected PHASE@STEP:MS");
  expect_usage_error({"--data=/x", "--device=cpu", "--steps=2", "--inject-stall=forward@2:3"},
                     "STEP must be a captured step");
  expect_usage_error({"--data=/x", "--device=cpu", "--cuda-graph"},
                     "--cuda-graph: CUDA graphs need --device cuda");
  EXPECT_FALSE(parse({"--data=/x", "--device=cpu", "--cuda-graph=false"}).config.cuda_graph);
  EXPECT_EQ(parse({"--data=/x", "--device=cpu"}).config.cuda_graph_memsets, GraphMemsets::kKernels);
  expect_usage_error({"--data=/x", "--device=cpu", "--cuda-graph-memsets=nodes"},
                     "--cuda-graph-memsets: only meaningful with --cuda-graph");
  expect_usage_error({"--data=/x", "--device=cpu", "--cuda-graph-memsets=kernel"},
                     "--cuda-graph-memsets");
  EXPECT_EQ(parse({"--data=/x", "--device=cpu"}).config.weight_cast, WeightCast::kAuto);
  expect_usage_error({"--data=/x", "--device=cpu", "--weight-cast=together"},
                     "--weight-cast: only meaningful with --precision bf16 or fp16");
  expect_usage_error({"--data=/x", "--device=cpu", "--weight-cast=each"}, "--weight-cast");
  if (cuda_available()) {
    EXPECT_EQ(
        parse({"--data=/x", "--precision=bf16", "--weight-cast=per-layer"}).config.weight_cast,
        WeightCast::kPerLayer);
    EXPECT_EQ(
        parse({"--data=/x", "--precision=bf16", "--weight-cast", "together"}).config.weight_cast,
        WeightCast::kTogether);
    EXPECT_EQ(
        parse({"--data=/x", "--precision=fp16", "--weight-cast=per-layer"}).config.weight_cast,
        WeightCast::kPerLayer);
    EXPECT_EQ(parse({"--data=/x", "--cuda-graph", "--cuda-graph-memsets=nodes"})
                  .config.cuda_graph_memsets,
              GraphMemsets::kNodes);
  }
}

TEST(TrainCliTest, EpochFlagsAndTheirCombinations) {
  test_util::TempDir tmp;
  const std::string ckpt = (tmp.path() / "ckpt").string();
  const TrainConfig c =
      parse({"--data=/x", "--device=cpu", "--epochs=10", "--eval-every=2", "--eval-batch-size=64",
             "--eval-split=train", "--checkpoint-dir=" + ckpt, "--resume", "--capture-at=90",
             "--steps=8", "--target-top1=0.5"})
          .config;
  EXPECT_EQ(c.epochs, 10);
  EXPECT_EQ(c.eval_every, 2);
  EXPECT_EQ(c.eval_batch_size, 64);
  EXPECT_EQ(c.eval_split, data_pipeline::Split::kTrain);
  EXPECT_EQ(c.checkpoint_dir, ckpt);
  EXPECT_TRUE(c.resume);
  EXPECT_EQ(c.capture_at, 90);
  EXPECT_EQ(c.target_top1, 0.5);
  EXPECT_FALSE(std::filesystem::exists(ckpt)) << "checked, not made, when the flags are checked";
  for (const char* alone : {"--eval-every=2", "--eval-batch-size=8", "--eval-split=train",
                            "--resume", "--capture-at=3", "--target-top1=0.2"}) {
    const std::string flag = std::string(alone).substr(0, std::string(alone).find('='));
    expect_usage_error({"--data=/x", "--device=cpu", alone},
                       flag + ": only meaningful with --epochs");
  }
  expect_usage_error({"--data=/x", "--device=cpu", "--checkpoint-dir=" + ckpt},
                     "--checkpoint-dir: only meaningful with --epochs");
  expect_usage_error({"--device=cpu", "--synthetic", "--epochs=2"}, "--epochs: an epoch is a pass");
  expect_usage_error({"--data=/x", "--device=cpu", "--epochs=2", "--mode=forward"},
                     "--epochs: needs --mode train");
  expect_usage_error({"--data=/x", "--device=cpu", "--epochs=2", "--reuse-iterator=false"},
                     "--reuse-iterator=false: an --epochs run");
  expect_usage_error({"--data=/x", "--device=cpu", "--epochs=2", "--resume"},
                     "--resume: needs --checkpoint-dir");
  expect_usage_error(
      {"--data=/x", "--device=cpu", "--epochs=2", "--eval-every=0", "--target-top1=0.3"},
      "--target-top1: needs evaluations");
  expect_usage_error({"--data=/x", "--device=cpu", "--epochs=2", "--inject-stall=forward@1:5"},
                     "--inject-stall: its STEP counts the captured steps");
  expect_usage_error({"--data=/x", "--device=cpu", "--epochs=2", "--target-top1=1.5"},
                     "--target-top1");
  expect_usage_error({"--data=/x", "--device=cpu", "--epochs=-1"}, "--epochs");
  const std::string file = (tmp.path() / "file").string();
  test_util::write_text(file, "x");
  expect_usage_error({"--data=/x", "--device=cpu", "--epochs=2", "--checkpoint-dir=" + file},
                     "--checkpoint-dir " + file + ": not a directory");
}

// An output may not replace a file the checkpoint directory keeps or a file of the dataset, however
// the path reaches it; one beside them is fine.
TEST(TrainCliTest, AnOutputNeverReplacesACheckpointOrADatasetFile) {
  namespace fs = std::filesystem;
  test_util::TempDir tmp;
  const fs::path ckpt = tmp.path() / "ckpt";
  fs::create_directories(ckpt);
  const std::vector<std::string> epochs = {"--data=/x", "--device=cpu", "--epochs=2",
                                           "--checkpoint-dir=" + ckpt.string()};
  auto with = [](std::vector<std::string> args, const std::string& extra) {
    args.push_back(extra);
    return args;
  };
  for (const char* kept : {"checkpoint-e000001.ckpt", ".lock", "checkpoint-e000002.ckpt.tmp.41"}) {
    expect_usage_error(with(epochs, "--report=" + (ckpt / kept).string()),
                       "a file --checkpoint-dir " + ckpt.string() + " keeps");
  }
  // Through a symlink, and through a `..` component.
  fs::create_symlink(ckpt / "checkpoint-e000003.ckpt", tmp.path() / "link.json");
  expect_usage_error(with(epochs, "--report=" + (tmp.path() / "link.json").string()),
                     "--report " + (tmp.path() / "link.json").string() + ": a file --checkpoint");
  expect_usage_error(
      with(epochs, "--report=" + (ckpt / ".." / "ckpt" / "checkpoint-e000009.ckpt").string()),
      "keeps");
  EXPECT_EQ(parse(with(epochs, "--report=" + (ckpt / "report.json").string())).config.report,
            (ckpt / "report.json").string());

  // The dataset: --data's food-101/, or the directory itself when it holds meta/.
  fs::create_directories(tmp.path() / "data" / "food-101" / "meta");
  fs::create_directories(tmp.path() / "data" / "food-101" / "images");
  const std::string data = (tmp.path() / "data").string();
  expect_usage_error(
      {"--data=" + data, "--device=cpu", "--report=" + data + "/food-101/meta/train.txt"},
      "--report " + data + "/food-101/meta/train.txt: inside the dataset --data");
  expect_usage_error({"--data=" + data, "--device=cpu",
                      "--torch-profiler-trace=" + data + "/food-101/images/x.jpg"},
                     "--torch-profiler-trace " + data + "/food-101/images/x.jpg: inside");
  expect_usage_error(
      {"--data=" + data + "/food-101", "--device=cpu", "--report=" + data + "/food-101/r.json"},
      "inside the dataset");
  EXPECT_EQ(parse({"--data=" + data, "--device=cpu", "--report=" + data + "/r.json"}).config.report,
            data + "/r.json");
}

TEST(TrainCliTest, HelpAndVersion) {
  const ParsedArgs h = parse({"--help"});
  EXPECT_TRUE(h.help);
  EXPECT_NE(h.help_text.find("--prefetch-factor"), std::string::npos);
  // Choices come from the name tables, defaults from TrainConfig.
  EXPECT_NE(h.help_text.find("fp32|bf16|fp16:"), std::string::npos) << h.help_text;
  EXPECT_NE(h.help_text.find("error|skip:"), std::string::npos) << h.help_text;
  EXPECT_NE(h.help_text.find("--decode"), std::string::npos) << h.help_text;
  EXPECT_NE(h.help_text.find("--cuda-graph"), std::string::npos) << h.help_text;
  EXPECT_NE(h.help_text.find("(default: 128)"), std::string::npos) << h.help_text;
  EXPECT_NE(h.help_text.find("constant|cosine|step:"), std::string::npos) << h.help_text;
  EXPECT_NE(h.help_text.find("(default: cosine)"), std::string::npos) << h.help_text;
  EXPECT_NE(h.help_text.find("0.1 x global batch / 256"), std::string::npos) << h.help_text;
  EXPECT_TRUE(parse({"--version"}).version);
  EXPECT_TRUE(parse({"-h"}).help);
}

// --help, --version and --print-config take a value as every boolean does: false means no.
TEST(TrainCliTest, RequestsAreBooleansLikeEveryOther) {
  for (const char* no : {"false", "no", "0", "off"}) {
    const std::string n = no;
    EXPECT_FALSE(parse({"--help=" + n, "--data=/x", "--device=cpu"}).help) << no;
    EXPECT_FALSE(parse({"--version=" + n, "--data=/x", "--device=cpu"}).version) << no;
    EXPECT_FALSE(parse({"--print-config=" + n, "--data=/x", "--device=cpu"}).print_config) << no;
  }
  EXPECT_TRUE(parse({"--help=yes"}).help);
  EXPECT_TRUE(parse({"--version=true"}).version);
  EXPECT_TRUE(parse({"--print-config=on", "--data=/x", "--device=cpu"}).print_config);
  expect_usage_error({"--print-config=maybe", "--data=/x"},
                     "--print-config: expected true or false");
  expect_usage_error({"--version=2"}, "--version: expected true or false, got '2'");
  expect_usage_error({"--help=x"}, "--help: expected true or false, got 'x'");
  // A request that is false leaves a run that must be valid.
  expect_usage_error({"--help=false"}, "--data: required");
}

}  // namespace
}  // namespace workload
