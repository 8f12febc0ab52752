// train_resnet50's command line: flags, defaults, help text and validation into a TrainConfig.
#include "lib/train_cli.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "lib/cli.h"
#include "lib/cuda_device.h"

namespace workload {

namespace {
// Smallest image size ResNet-50's five stride-2 stages accept (32 / 2^5 = 1 pixel at the end).
constexpr int kMinImageSize = 32;
}  // namespace

ParsedArgs parse_train_args(int argc, const char* const* argv) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const std::string default_workers = std::to_string(std::min(8u, hw));
  const std::string default_device = cuda_available() ? "cuda" : "cpu";
  auto str = [](const std::string& d) { return cxxopts::value<std::string>()->default_value(d); };
  auto flag = [](const std::string& d) {
    return cxxopts::value<std::string>()->default_value(d)->implicit_value("true");
  };
  cxxopts::Options options(
      "train_resnet50",
      "ResNet-50 (channels_last) trained on Food-101 with NVTX ranges around every phase of the "
      "step and cudaProfilerStart/Stop around the captured steps. Run it under\n"
      "  nsys profile --trace=cuda,nvtx,osrt --sample=none --cpuctxsw=none "
      "--capture-range=cudaProfilerApi --capture-range-end=stop --output=NAME train_resnet50 ...\n"
      "Booleans take --flag=false.");
  options.set_width(100);
  // clang-format off
  options.add_options("Data")
      ("data", "Food-101 root (holds food-101/, or is it)", cxxopts::value<std::string>())
      ("split", "train|test", str("train"))
      ("batch-size", "images per step", str("128"))
      ("image-size", "crop size in pixels (>= 32)", str("224"))
      ("workers", "loader threads; 0 decodes on the main thread", str(default_workers))
      ("prefetch-factor", "batches per worker decoded ahead", str("2"))
      ("pin-memory", "page-locked batch ring (CUDA only)", flag("true"))
      ("work-unit", "batch: a worker builds a whole batch; sample: workers share a batch",
       str("batch"))
      ("reuse-iterator", "keep the warm-up's loader traversal for the capture", flag("true"))
      ("on-bad-image", "error|skip: what an undecodable image does", str("error"))
      ("synthetic", "random batches made once on the device, no loader (GPU-bound ceiling)",
       flag("false"));
  // clang-format on
  // clang-format off
  options.add_options("Run")
      ("warmup", "steps before the capture", str("3"))
      ("steps", "captured steps", str("8"))
      ("seed", "seed for the model, the order and the augmentation", str("2026"))
      ("device", "cuda|cpu", str(default_device))
      ("cudnn-benchmark", "let cuDNN time its algorithms", flag("false"))
      ("intra-op-threads", "LibTorch CPU threads (the article uses 1)", str("1"))
      ("lr", "SGD learning rate", str("0.1"))
      ("momentum", "SGD momentum", str("0.9"))
      ("weight-decay", "SGD weight decay", str("0.0001"))
      ("copy-stream", "issue host-to-device copies on a side stream", flag("true"))
      ("nvtx", "emit the NVTX ranges (false measures their cost)", flag("true"));
  // clang-format on
  // clang-format off
  options.add_options("Experiments")
      ("precision", "fp32|bf16: bf16 autocast for forward and loss (CUDA)", str("fp32"))
      ("host-dtype", "float32|uint8: uint8 batches are normalised on the device", str("float32"))
      ("nvtx-detail", "steps|layers: layers adds ranges per stage and block inside forward",
       str("steps"))
      ("torch-profiler-trace", "record the capture window with LibTorch's profiler (Kineto) "
       "into this Chrome trace JSON; not under nsys", cxxopts::value<std::string>())
      ("mode", "train|forward: forward-only drops zero_grad, backward and optimizer_step",
       str("train"))
      ("forward-bn", "eval|train: BatchNorm statistics in --mode forward", str("eval"))
      ("sync-every-step", "read the loss on the host every step (an implicit sync per step)",
       flag("false"));
  // clang-format on
  // clang-format off
  options.add_options("Output")
      ("report", "write the JSON report here", cxxopts::value<std::string>())
      ("quiet", "no per-step progress lines", flag("false"))
      ("h,help", "print this help")
      ("version", "print the version");
  // clang-format on

  // cxxopts wants mutable argv.
  std::vector<std::string> storage(argv, argv + argc);
  std::vector<char*> args;
  for (auto& s : storage) args.push_back(s.data());
  int n = static_cast<int>(args.size());
  char** pargv = args.data();
  const auto result = options.parse(n, pargv);

  ParsedArgs out;
  out.help_text = options.help({"Data", "Run", "Experiments", "Output"});
  if (result.count("help")) {
    out.help = true;
    return out;
  }
  if (result.count("version")) {
    out.version = true;
    return out;
  }
  FlagReader f(result);
  f.reject_unmatched();
  TrainConfig& c = out.config;
  c.synthetic = f.boolean("synthetic");
  if (f.has("data")) c.data = f.string("data");
  if (c.data.empty() && !c.synthetic) {
    throw UsageError("--data: required (a Food-101 root), unless --synthetic is given");
  }
  c.split = f.choice("split", {"train", "test"});
  c.batch_size = f.integer("batch-size", 1, 1 << 16);
  c.image_size = static_cast<int>(f.integer("image-size", kMinImageSize, 4096));
  c.workers = static_cast<int>(f.integer("workers", 0, 1024));
  c.prefetch_factor = static_cast<int>(f.integer("prefetch-factor", 1, 1024));
  c.pin_memory = f.boolean("pin-memory");
  c.work_unit = f.choice("work-unit", {"batch", "sample"}) == "sample"
                    ? data_pipeline::WorkUnit::kSample
                    : data_pipeline::WorkUnit::kBatch;
  c.reuse_iterator = f.boolean("reuse-iterator");
  c.on_bad_image = f.choice("on-bad-image", {"error", "skip"}) == "skip"
                       ? data_pipeline::BadImagePolicy::kSkip
                       : data_pipeline::BadImagePolicy::kError;
  c.warmup = static_cast<int>(f.integer("warmup", 0, 1000000));
  c.steps = static_cast<int>(f.integer("steps", 1, 1000000));
  c.seed = f.unsigned_integer("seed");
  c.device = f.choice("device", {"cuda", "cpu"});
  c.cudnn_benchmark = f.boolean("cudnn-benchmark");
  c.intra_op_threads = static_cast<int>(f.integer("intra-op-threads", 1, 1024));
  c.lr = f.real("lr", 0.0, 1e6);
  c.momentum = f.real("momentum", 0.0, 1.0);
  c.weight_decay = f.real("weight-decay", 0.0, 1e3);
  c.copy_stream = f.boolean("copy-stream");
  c.nvtx = f.boolean("nvtx");
  if (f.has("report")) {
    c.report = f.string("report");
    if (c.report.empty()) throw UsageError("--report: expected a file path, got ''");
  }
  c.quiet = f.boolean("quiet");
  c.precision = f.choice("precision", {"fp32", "bf16"});
  c.host_dtype = f.choice("host-dtype", {"float32", "uint8"}) == "uint8"
                     ? data_pipeline::HostDType::kUInt8
                     : data_pipeline::HostDType::kFloat32;
  c.nvtx_detail = f.choice("nvtx-detail", {"steps", "layers"});
  c.mode = f.choice("mode", {"train", "forward"});
  c.forward_bn = f.choice("forward-bn", {"eval", "train"});
  c.sync_every_step = f.boolean("sync-every-step");
  if (f.has("torch-profiler-trace")) {
    c.torch_profiler_trace = f.string("torch-profiler-trace");
    const std::filesystem::path p(c.torch_profiler_trace);
    const auto dir = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
    if (c.torch_profiler_trace.empty() || !std::filesystem::is_directory(dir)) {
      throw UsageError(
          "--torch-profiler-trace: expected a file path in an existing directory, "
          "got '" +
          c.torch_profiler_trace + "'");
    }
  }
  if (c.precision == "bf16" && c.device == "cpu") {
    throw UsageError(
        "--precision bf16: bf16 autocast is implemented for CUDA only; use "
        "--precision fp32 with --device cpu");
  }
  if (f.has("forward-bn") && c.mode != "forward") {
    throw UsageError("--forward-bn: only meaningful with --mode forward");
  }
  if (c.device == "cuda" && !cuda_available()) {
    throw UsageError(
        "--device cuda: no CUDA device is available (this LibTorch build has no "
        "CUDA, or no GPU is visible); use --device cpu");
  }
  return out;
}

}  // namespace workload
