// The one place a TrainConfig is validated: its flags' ranges, combinations, machine and paths.
#include "lib/train_config.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <unistd.h>

#include <filesystem>

#include "lib/cuda_device.h"
#include "lib/gpu_decode_input.h"
#include "lib/norm_activation.h"
#include "lib/step_plan.h"
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
  const std::filesystem::file_status st = std::filesystem::status(p, ec);
  if (std::filesystem::is_directory(st)) throw UsageError(flag + ": " + path + " is a directory");
  // Written at the end of the run: opening a pipe nobody reads would hold the finished run there.
  if (std::filesystem::is_fifo(st) || std::filesystem::is_socket(st)) {
    throw UsageError(flag + ": " + path + " is a " +
                     (std::filesystem::is_fifo(st) ? "named pipe" : "socket") +
                     "; expected a regular file");
  }
  if (std::filesystem::exists(st) && ::access(p.c_str(), W_OK) != 0) {
    throw UsageError(flag + ": " + path + " exists and is not writable");
  }
}

InjectedStall parse_list_item(const std::string& text, InjectedStall*) {
  const auto at = text.find('@');
  const auto colon = text.find(':', at == std::string::npos ? 0 : at);
  if (at == std::string::npos || colon == std::string::npos || at == 0) {
    throw std::invalid_argument("expected PHASE@STEP:MS (e.g. forward@3:50)");
  }
  InjectedStall s;
  s.phase = text.substr(0, at);
  const std::string step = text.substr(at + 1, colon - at - 1);
  const std::string ms = text.substr(colon + 1);
  std::size_t used = 0;
  try {
    const long v = std::stol(step, &used);
    if (used != step.size() || v < 0 || v > 1000000) throw std::out_of_range(step);
    s.step = static_cast<int>(v);
  } catch (const std::logic_error&) {
    throw std::invalid_argument("STEP must be an integer >= 0, got '" + step + "'");
  }
  try {
    s.ms = std::stod(ms, &used);
    if (used != ms.size() || !(s.ms > 0) || s.ms > kMaxInjectedStallMs) {
      throw std::out_of_range(ms);
    }
  } catch (const std::logic_error&) {
    throw std::invalid_argument("MS must be a number in (0, " +
                                std::to_string(static_cast<int>(kMaxInjectedStallMs)) + "], got '" +
                                ms + "'");
  }
  return s;
}

std::string to_string(const InjectedStall& s) {
  std::ostringstream out;
  out << s.phase << '@' << s.step << ':' << s.ms;
  return out.str();
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
  if (c.cuda_graph_memsets != GraphMemsets::kKernels && !c.cuda_graph) {
    throw UsageError("--cuda-graph-memsets: only meaningful with --cuda-graph");
  }
  if (c.cuda_graph) {
    if (c.nvtx_detail == NvtxDetail::kLayers) {
      throw UsageError(
          "--cuda-graph: --nvtx-detail layers marks the host's kernel launches, and a replayed "
          "graph makes none; use --nvtx-detail steps (nsys --cuda-graph-trace=node shows the "
          "graph's kernels)");
    }
    if (c.warmup < 1) {
      throw UsageError(
          "--cuda-graph: needs --warmup 1 or more (eager warm-up steps create the optimizer's "
          "momentum buffers and settle cuDNN and cuBLAS before the capture)");
    }
    if (c.device == Device::kCpu) {
      throw UsageError("--cuda-graph: CUDA graphs need --device cuda");
    }
  }
  if (c.fused_bn) {
    check_fused_bn_built();  // first: without the kernels no other setting helps
    if (c.device == Device::kCpu) {
      throw UsageError("--fused-bn: cuDNN's fused batch norm needs --device cuda");
    }
    if (c.loader.transform.layout != data_pipeline::ImageLayout::kChannelsLast) {
      throw UsageError(
          std::string("--fused-bn: cuDNN's fused batch norm runs on NHWC tensors; needs "
                      "--memory-format channels_last, got ") +
          to_string(c.loader.transform.layout));
    }
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
    check_gpu_decode_built();
  }
  const std::vector<std::string> ranges = step_ranges(c);
  for (const InjectedStall& s : c.inject_stall) {
    if (std::find(ranges.begin(), ranges.end(), s.phase) == ranges.end()) {
      std::string names;
      for (const auto& p : ranges) names += (names.empty() ? "" : ", ") + p;
      throw UsageError("--inject-stall " + to_string(s) +
                       ": PHASE must be one of this run's step " + "ranges (" + names + "), got '" +
                       s.phase + "'");
    }
    if (s.step >= c.steps) {
      throw UsageError("--inject-stall " + to_string(s) + ": STEP must be a captured step, 0 to " +
                       std::to_string(c.steps - 1) + " (--steps " + std::to_string(c.steps) + ")");
    }
  }
  if (!c.report.empty()) check_output_path("--report", c.report);
  if (!c.torch_profiler_trace.empty()) {
    check_output_path("--torch-profiler-trace", c.torch_profiler_trace);
  }
}

}  // namespace workload
