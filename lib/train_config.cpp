// The one place a TrainConfig is validated: its flags' ranges, combinations, machine and paths.
#include "lib/train_config.h"

#include <unistd.h>

#include <filesystem>

#include "lib/cuda_device.h"
#include "lib/train_flags.h"

namespace workload {

void check_output_path(const std::string& flag, const std::string& path) {
  if (path.empty()) throw UsageError(flag + ": expected a file path, got ''");
  const std::filesystem::path p(path);
  const auto dir = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw UsageError(flag + ": directory " + dir.string() + " does not exist");
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    throw UsageError(flag + ": directory " + dir.string() + " is not writable");
  }
  if (std::filesystem::is_directory(p, ec))
    throw UsageError(flag + ": " + path + " is a directory");
}

void validate(const TrainConfig& c) {
  visit_train_flags(c, CheckFlagRanges{});
  if (c.data.empty() && !c.synthetic) {
    throw UsageError("--data: required (a Food-101 root), unless --synthetic is given");
  }
  if (c.precision == Precision::kBf16 && c.device == Device::kCpu) {
    throw UsageError(
        "--precision bf16: bf16 autocast is implemented for CUDA only; use --precision fp32 with "
        "--device cpu");
  }
  if (c.forward_bn != ForwardBn::kEval && c.mode != RunMode::kForward) {
    throw UsageError("--forward-bn: only meaningful with --mode forward");
  }
  if (c.device == Device::kCuda && !cuda_available()) {
    throw UsageError(
        "--device cuda: no CUDA device is available (this LibTorch build has no CUDA, or no GPU "
        "is visible); use --device cpu");
  }
  if (c.loader.decode == data_pipeline::DecodeDevice::kGpu) {
    if (c.synthetic) {
      throw UsageError("--decode gpu: --synthetic reads no images; drop one of the two");
    }
    if (c.device == Device::kCpu) {
      throw UsageError("--decode gpu: decodes on the GPU the model runs on; needs --device cuda");
    }
#if !defined(WORKLOAD_HAVE_NVJPEG)
    throw UsageError(std::string("--decode gpu: this build has no GPU decode stage (") +
                     WORKLOAD_NVJPEG_MISSING + "); use --decode cpu");
#endif
  }
  if (!c.report.empty()) check_output_path("--report", c.report);
  if (!c.torch_profiler_trace.empty()) {
    check_output_path("--torch-profiler-trace", c.torch_profiler_trace);
  }
}

}  // namespace workload
