// Tests for train_resnet50's flag parsing: defaults, booleans, and a named error for each misuse.
#include "lib/run/train_cli.h"

#include <gtest/gtest.h>

#include <thread>

#include "lib/config/cli.h"
#include "lib/device/cuda_device.h"
#include "lib/dist/data_parallel.h"

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
  EXPECT_DOUBLE_EQ(c.lr, 0.1);
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
  EXPECT_DOUBLE_EQ(c.lr, 0.5);
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
  if (cuda_available()) {
    EXPECT_EQ(parse({"--data=/x", "--cuda-graph", "--cuda-graph-memsets=nodes"})
                  .config.cuda_graph_memsets,
              GraphMemsets::kNodes);
  }
}

TEST(TrainCliTest, HelpAndVersion) {
  const ParsedArgs h = parse({"--help"});
  EXPECT_TRUE(h.help);
  EXPECT_NE(h.help_text.find("--prefetch-factor"), std::string::npos);
  // Choices come from the name tables, defaults from TrainConfig.
  EXPECT_NE(h.help_text.find("fp32|bf16:"), std::string::npos) << h.help_text;
  EXPECT_NE(h.help_text.find("error|skip:"), std::string::npos) << h.help_text;
  EXPECT_NE(h.help_text.find("--decode"), std::string::npos) << h.help_text;
  EXPECT_NE(h.help_text.find("--cuda-graph"), std::string::npos) << h.help_text;
  EXPECT_NE(h.help_text.find("(default: 128)"), std::string::npos) << h.help_text;
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
