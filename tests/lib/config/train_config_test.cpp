// Tests for TrainConfig's one validation (combinations, machine, paths, and the flag table's ranges
// for values set in code), for the report keys its flag table yields, and for the flags page's
// tables (docs/flags.md), which must list exactly the table's flags.
#include "lib/config/train_config.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "lib/config/flag_table.h"
#include "lib/config/train_flags.h"
#include "lib/core/build_features.h"
#include "lib/core/output_file.h"
#include "lib/device/cuda_device.h"
#include "tests/support/test_util.h"

namespace workload {
namespace {

TrainConfig cpu_config() {
  TrainConfig c;
  c.data = "/data";
  c.device = Device::kCpu;
  return c;
}

void expect_invalid(const TrainConfig& c, const std::string& fragment) {
  try {
    validate(c);
    FAIL() << "expected a UsageError containing '" << fragment << "'";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(TrainConfigTest, TheArticlesSettingsAreValid) { EXPECT_NO_THROW(validate(cpu_config())); }

TEST(TrainConfigTest, CombinationsThatCannotRunNameTheirFlag) {
  TrainConfig c = cpu_config();
  c.data.clear();
  expect_invalid(c, "--data: required");
  c.synthetic = true;
  EXPECT_NO_THROW(validate(c));

  c = cpu_config();
  c.precision = Precision::kBf16;
  expect_invalid(c, "--precision bf16");
  c.precision = Precision::kFp16;
  expect_invalid(c, "--precision fp16: fp16 autocast is implemented for CUDA only");

  c = cpu_config();
  c.deterministic = true;
  EXPECT_NO_THROW(validate(c));
  c.cudnn_benchmark = true;
  expect_invalid(c, "--deterministic: --cudnn-benchmark times cuDNN's algorithms");

  c = cpu_config();
  c.fuse_conv_bn = true;
  EXPECT_NO_THROW(validate(c));  // LibTorch's kernels on the CPU
  c.mode = RunMode::kForward;
  expect_invalid(c, "--fuse-conv-bn: only meaningful in training");

  c = cpu_config();
  c.forward_bn = ForwardBn::kTrain;
  expect_invalid(c, "--forward-bn: only meaningful with --mode forward");
  c.mode = RunMode::kForward;
  EXPECT_NO_THROW(validate(c));

  c = cpu_config();
  c.cuda_graph_memsets = GraphMemsets::kNodes;
  expect_invalid(c, "--cuda-graph-memsets: only meaningful with --cuda-graph");

  for (const WeightCast w : {WeightCast::kTogether, WeightCast::kPerLayer}) {
    c = cpu_config();
    c.weight_cast = w;
    expect_invalid(c, "--weight-cast: only meaningful with --precision bf16 or fp16");
    c.device = Device::kCuda;
    expect_invalid(c, "--weight-cast: only meaningful with --precision bf16 or fp16");
    for (const Precision p : {Precision::kBf16, Precision::kFp16}) {
      c.precision = p;
      if (cuda_available()) {
        EXPECT_NO_THROW(validate(c));
      } else {
        expect_invalid(c, "--device cuda: no CUDA device");
      }
    }
  }

  c = cpu_config();
  c.device = Device::kCuda;
  if (cuda_available()) {
    EXPECT_NO_THROW(validate(c));
  } else {
    expect_invalid(c, "--device cuda: no CUDA device");
  }
}

TEST(TrainConfigTest, AutoCastsTheWeightsTogetherInASingleProcessOnly) {
  EXPECT_EQ(resolve_weight_cast(WeightCast::kAuto, /*distributed=*/false), WeightCast::kTogether);
  EXPECT_EQ(resolve_weight_cast(WeightCast::kAuto, /*distributed=*/true), WeightCast::kPerLayer);
  for (const bool distributed : {false, true}) {
    EXPECT_EQ(resolve_weight_cast(WeightCast::kTogether, distributed), WeightCast::kTogether);
    EXPECT_EQ(resolve_weight_cast(WeightCast::kPerLayer, distributed), WeightCast::kPerLayer);
  }
}

TEST(TrainConfigTest, ValuesSetInCodeAreCheckedAgainstTheFlagRanges) {
  TrainConfig c = cpu_config();
  c.steps = 0;
  expect_invalid(c, "--steps: expected an integer in [1, 1000000], got 0");
  c = cpu_config();
  c.loader.transform.image_size = 16;
  expect_invalid(c, "--image-size");
  c = cpu_config();
  c.loader.workers = -1;
  expect_invalid(c, "--workers");
  c = cpu_config();
  c.momentum = 1.5;
  expect_invalid(c, "--momentum");
  c = cpu_config();
  c.label_smoothing = 1.5;
  expect_invalid(c, "--label-smoothing: expected a number in [0, 1], got 1.5");
  c = cpu_config();
  c.lr = -1;
  expect_invalid(c, "--lr: expected a number in [0, 1e+06], got -1");
  c = cpu_config();
  c.lr_warmup_steps = -1;
  expect_invalid(c, "--lr-warmup-steps: expected an integer in [0, 1000000], got -1");
  c.lr_warmup_steps = 5;
  c.lr = 0.5;
  EXPECT_NO_THROW(validate(c));
}

TEST(TrainConfigTest, OutputPathsAreCheckedBeforeTheRun) {
  test_util::TempDir tmp;
  EXPECT_NO_THROW(check_output_file("--report", (tmp / "r.json").string()));
  EXPECT_NO_THROW(check_output_file("--report", "relative.json"));
  auto expect_bad = [](const std::string& path, const std::string& fragment) {
    try {
      check_output_file("--report", path);
      FAIL() << path;
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--report: ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_bad("", "expected a file path");
  expect_bad((tmp / "missing" / "r.json").string(), "does not exist");
  expect_bad(tmp.path().string(), "is a directory");
  if (::geteuid() != 0) {  // root writes anywhere
    ::chmod(tmp.path().c_str(), 0500);
    expect_bad((tmp / "r.json").string(), "is not writable");
    ::chmod(tmp.path().c_str(), 0700);
    test_util::write_text(tmp / "read_only.json", "{}");
    ::chmod((tmp / "read_only.json").c_str(), 0400);
    expect_bad((tmp / "read_only.json").string(), "read_only.json exists and is not writable");
  }
  // A named pipe would hold the finished run at the report's open; /dev/null is fine.
  ASSERT_EQ(::mkfifo((tmp / "pipe").c_str(), 0600), 0);
  expect_bad((tmp / "pipe").string(), "pipe is a named pipe; expected a regular file");
  EXPECT_NO_THROW(check_output_file("--report", "/dev/null"));
  test_util::write_text(tmp / "old.json", "{}");
  EXPECT_NO_THROW(check_output_file("--report", (tmp / "old.json").string()));  // overwritten
  TrainConfig c = cpu_config();
  c.torch_profiler_trace = (tmp / "missing" / "t.json").string();
  expect_invalid(c, "--torch-profiler-trace: directory");
  c = cpu_config();
  c.report = (tmp / "missing" / "r.json").string();
  expect_invalid(c, "--report: directory");
  // One file for both would lose the trace under the report, whichever way it is spelled.
  c = cpu_config();
  c.report = (tmp / "out.json").string();
  c.torch_profiler_trace = (tmp / "." / "out.json").string();
  expect_invalid(
      c, "--torch-profiler-trace " + c.torch_profiler_trace + ": the same file as --report");
  c.torch_profiler_trace = (tmp / "trace.json").string();
  EXPECT_NO_THROW(validate(c));
}

TEST(TrainConfigTest, TheReportHoldsEveryFlagButQuietAndTheDefaultsAreTheArticles) {
  nlohmann::ordered_json j;
  const TrainConfig defaults;
  visit_train_flags(defaults, FlagsToJson(j));
  std::set<std::string> keys;
  for (const auto& [key, value] : j.items()) keys.insert(key);
  // clang-format off
  const std::set<std::string> expected = {
      "data", "split", "batch_size", "warmup", "steps", "workers", "prefetch_factor",
      "pin_memory", "work_unit", "reuse_iterator", "seed", "device", "image_size",
      "cudnn_benchmark", "deterministic", "intra_op_threads", "lr", "momentum", "weight_decay", "synthetic",
      "copy_stream", "nvtx", "on_bad_image", "report", "precision", "host_dtype", "nvtx_detail",
      "torch_profiler_trace", "mode", "forward_bn", "sync_every_step",
      // data parallelism (issue 12)
      "dist_backend", "dist_timeout_s", "bucket_mb", "broadcast_buffers", "grad_bucket_view",
      // GPU decode (issue 13)
      "decode",
      // known-answer stalls, the memory format and the CUDA-graph step (issue 14)
      "inject_stall", "memory_format", "cuda_graph", "cuda_graph_memsets",
      // the cap on an image file's size (issue 21)
      "max_image_mb",
      // dead and frozen peers (issue 22)
      "dist_peer_timeout_s",
      // cuDNN's fused batch norm (issue 24), the fused bottleneck (issue 45)
      "fused_bn", "fuse_conv_bn",
      // a learning-rate schedule that learns by default (issue 33)
      "lr_schedule", "lr_warmup_steps", "label_smoothing", "lr_on_device",
      // epochs, evaluation, checkpoints and the capture window anywhere (issue 33)
      "epochs", "eval_every", "eval_batch_size", "eval_split", "checkpoint_dir", "resume",
      "capture_at", "target_top1",
      // a checkpoint directory owned by one run, and no figures from a broken one (issue 42)
      "start_over", "allow_nonfinite_loss",
      // autocast's weight casts made together (issue 32)
      "weight_cast",
      // the stem's input padded to 4 channels (issue 45)
      "stem_pad"};
  // clang-format on
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(j["batch_size"], 128);
  EXPECT_EQ(j["max_image_mb"], 64);
  EXPECT_EQ(j["workers"], 8);
  EXPECT_EQ(j["prefetch_factor"], 2);
  EXPECT_EQ(j["pin_memory"], true);
  EXPECT_EQ(j["work_unit"], "batch");
  EXPECT_EQ(j["seed"], 2026);
  EXPECT_EQ(j["image_size"], 224);
  EXPECT_EQ(j["warmup"], 3);
  EXPECT_EQ(j["steps"], 8);
  EXPECT_EQ(j["weight_cast"], "auto");
  // The learning rate is the one default beyond the article's: null where a rule decides (the
  // scaled peak, the warm-up's share), the cosine schedule, no label smoothing.
  EXPECT_TRUE(j["lr"].is_null());
  EXPECT_TRUE(j["lr_warmup_steps"].is_null());
  EXPECT_EQ(j["lr_schedule"], "cosine");
  EXPECT_EQ(j["label_smoothing"], 0.0);
  EXPECT_EQ(j["lr_on_device"], false);
  EXPECT_EQ(j["weight_decay"], 1e-4);
  EXPECT_EQ(j["device"], "cuda");
  EXPECT_EQ(j["split"], "train");
  EXPECT_EQ(j["precision"], "fp32");
  EXPECT_EQ(j["host_dtype"], "float32");
  EXPECT_EQ(j["decode"], "cpu");
  EXPECT_EQ(j["memory_format"], "channels_last");
  EXPECT_EQ(j["cuda_graph"], false);
  EXPECT_EQ(j["fused_bn"], false);
  EXPECT_EQ(j["deterministic"], false);
}

TEST(TrainConfigTest, InjectedStallsParseAndPrint) {
  const InjectedStall s = parse_list_item("backward@7:12.5", static_cast<InjectedStall*>(nullptr));
  EXPECT_EQ(s, (InjectedStall{"backward", 7, 12.5}));
  EXPECT_EQ(to_string(s), "backward@7:12.5");
  for (const char* bad : {"forward", "forward@3", "@3:5", "forward@x:5", "forward@-1:5",
                          "forward@3:0", "forward@3:-2", "forward@3:5ms", "forward@3:1e9"}) {
    EXPECT_THROW(parse_list_item(bad, static_cast<InjectedStall*>(nullptr)), std::invalid_argument)
        << bad;
  }
}

TEST(TrainConfigTest, CudaGraphNeedsAGpuAWarmupAndNoLayerRanges) {
  TrainConfig c = cpu_config();
  c.cuda_graph = true;
  expect_invalid(c, "--cuda-graph: CUDA graphs need --device cuda");
  c.warmup = 0;
  expect_invalid(c, "--cuda-graph: needs --warmup 1 or more");
  c.warmup = 1;
  c.nvtx_detail = NvtxDetail::kLayers;
  expect_invalid(c, "--cuda-graph: --nvtx-detail layers");
  if (cuda_available()) {
    c.device = Device::kCuda;
    c.nvtx_detail = NvtxDetail::kSteps;
    EXPECT_NO_THROW(validate(c));
  }
}

TEST(TrainConfigTest, GpuDecodeNeedsImagesAGpuAndAStageInThisBuild) {
  TrainConfig c = cpu_config();
  c.loader.decode = data_pipeline::DecodeDevice::kGpu;
  expect_invalid(c, "--decode gpu: decodes on the GPU the model runs on; needs --device cuda");
  c.synthetic = true;
  expect_invalid(c, "--decode gpu: --synthetic reads no images");
  if (cuda_available() && !built(Feature::kGpuDecode)) {
    c = cpu_config();
    c.device = Device::kCuda;
    c.loader.decode = data_pipeline::DecodeDevice::kGpu;
    expect_invalid(c, "--decode gpu: this build has no GPU decode stage");
  }
}

TEST(TrainConfigTest, FusedBnNeedsTheKernelsInThisBuildAGpuAndChannelsLast) {
  TrainConfig c = cpu_config();
  c.fused_bn = true;
  if (!built(Feature::kFusedBn)) {
    expect_invalid(c, "--fused-bn: this build has no fused batch norm (");
    c.device = Device::kCuda;
    expect_invalid(c, "--fused-bn: this build has no fused batch norm (");
    return;
  }
  expect_invalid(c, "--fused-bn: cuDNN's fused batch norm needs --device cuda");
  c.device = Device::kCuda;
  c.loader.transform.layout = data_pipeline::ImageLayout::kNchw;
  expect_invalid(c,
                 "--fused-bn: cuDNN's fused batch norm runs on NHWC tensors; needs "
                 "--memory-format channels_last, got nchw");
  if (cuda_available()) {
    c.loader.transform.layout = data_pipeline::ImageLayout::kChannelsLast;
    EXPECT_NO_THROW(validate(c));
    c.cuda_graph = true;
    c.precision = Precision::kBf16;
    EXPECT_NO_THROW(validate(c));
  }
}

// The name of every flag a table visits, whatever its kind.
class FlagNames {
 public:
  explicit FlagNames(std::set<std::string>& names) : names_(names) {}
  template <typename... A>
  void text(const FlagInfo& f, const A&...) {
    names_.insert(f.name);
  }
  template <typename... A>
  void integer(const FlagInfo& f, const A&...) {
    names_.insert(f.name);
  }
  template <typename... A>
  void real(const FlagInfo& f, const A&...) {
    names_.insert(f.name);
  }
  template <typename... A>
  void boolean(const FlagInfo& f, const A&...) {
    names_.insert(f.name);
  }
  template <typename... A>
  void choice(const FlagInfo& f, const A&...) {
    names_.insert(f.name);
  }
  template <typename... A>
  void list(const FlagInfo& f, const A&...) {
    names_.insert(f.name);
  }

 private:
  std::set<std::string>& names_;
};

// Every "--name" in the first cell of the rows of the page's tables headed "| flag | default |
// meaning |" (a cell may hold two flags, or a flag with its choices). Other tables do not count.
std::set<std::string> flags_page_names() {
  std::ifstream in(WORKLOAD_FLAGS_PAGE);
  if (!in) throw std::runtime_error(std::string("cannot read ") + WORKLOAD_FLAGS_PAGE);
  const std::regex flag("--([a-z0-9][a-z0-9-]*)");
  std::set<std::string> names;
  std::string line;
  bool table = false;
  while (std::getline(in, line)) {
    if (line.rfind('|', 0) != 0) {
      table = false;
      continue;
    }
    if (line == "| flag | default | meaning |") {
      table = true;
      continue;
    }
    if (!table || line.rfind("|---", 0) == 0) continue;
    const std::string cell = line.substr(1, line.find(" | ", 1) - 1);
    for (std::sregex_iterator m(cell.begin(), cell.end(), flag), end; m != end; ++m) {
      names.insert((*m)[1]);
    }
  }
  return names;
}

std::string joined(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "--" : ", --") + n;
  return out;
}

TEST(TrainConfigTest, TheFlagsPageListsExactlyTheTablesFlags) {
  std::set<std::string> table;
  const TrainConfig config;
  visit_train_flags(config, FlagNames(table));
  const std::set<std::string> page = flags_page_names();
  ASSERT_FALSE(page.empty()) << "no '| flag | default | meaning |' table in "
                             << WORKLOAD_FLAGS_PAGE;
  std::set<std::string> missing;
  std::set<std::string> extra;
  for (const auto& n : table) {
    if (page.count(n) == 0) missing.insert(n);
  }
  for (const auto& n : page) {
    if (table.count(n) == 0) extra.insert(n);
  }
  EXPECT_TRUE(missing.empty()) << WORKLOAD_FLAGS_PAGE
                               << " lacks flags of lib/config/train_flags.h: " << joined(missing);
  EXPECT_TRUE(extra.empty()) << WORKLOAD_FLAGS_PAGE
                             << " lists flags that lib/config/train_flags.h does not have: "
                             << joined(extra);
}

}  // namespace
}  // namespace workload
