// A TrainConfig validated: its flags' ranges, combinations, machine, build and paths.
#include "lib/config/train_config.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "lib/config/train_flags.h"
#include "lib/core/build_features.h"
#include "lib/core/output_file.h"
#include "lib/device/cuda_device.h"

namespace workload {

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

namespace {

// The flags that only mean something with --epochs, refused without it (the first one given).
void refuse_epoch_flags_alone(const TrainConfig& c) {
  const std::pair<bool, const char*> given[] = {
      {c.eval_every != 1, "--eval-every"},
      {c.eval_batch_size.has_value(), "--eval-batch-size"},
      {c.eval_split != data_pipeline::Split::kTest, "--eval-split"},
      {!c.checkpoint_dir.empty(), "--checkpoint-dir"},
      {c.resume, "--resume"},
      {c.start_over, "--start-over"},
      {c.capture_at.has_value(), "--capture-at"},
      {c.target_top1.has_value(), "--target-top1"},
  };
  for (const auto& [is_given, flag] : given) {
    if (is_given) {
      throw UsageError(std::string(flag) + ": only meaningful with --epochs (a run of --warmup " +
                       "+ --steps has no epochs, evaluation or checkpoints)");
    }
  }
}

// An --epochs run: what it cannot be combined with, and what its own flags need.
void validate_epoch_run(const TrainConfig& c) {
  if (c.synthetic) {
    throw UsageError(
        "--epochs: an epoch is a pass over a split, and --synthetic reads none; give "
        "--data");
  }
  if (c.mode != RunMode::kTrain) throw UsageError("--epochs: needs --mode train");
  if (!c.reuse_iterator) {
    throw UsageError(
        "--reuse-iterator=false: an --epochs run starts each epoch's traversal itself "
        "and has no iterator_reset; drop the flag");
  }
  if (c.cuda_graph) {
    throw UsageError(
        "--epochs: not with --cuda-graph (the evaluation and the epochs' ends run eager); drop "
        "one of the two");
  }
  if (c.resume && c.checkpoint_dir.empty()) {
    throw UsageError("--resume: needs --checkpoint-dir, the directory to resume from");
  }
  if (c.start_over && c.checkpoint_dir.empty()) {
    throw UsageError("--start-over: needs --checkpoint-dir, the directory to start over in");
  }
  if (c.start_over && c.resume) {
    throw UsageError(
        "--start-over: not with --resume (one continues the directory's run, the "
        "other deletes it); drop one of the two");
  }
  if (c.target_top1 && c.eval_every == 0) {
    throw UsageError("--target-top1: needs evaluations; --eval-every 0 makes none");
  }
  if (!c.inject_stall.empty() && !c.capture_at) {
    throw UsageError(
        "--inject-stall: its STEP counts the captured steps, and an --epochs run has "
        "them only with --capture-at");
  }
  if (!c.torch_profiler_trace.empty() && !c.capture_at) {
    throw UsageError(
        "--torch-profiler-trace: records the capture window, and an --epochs run "
        "has one only with --capture-at");
  }
}

// --epochs and the flags that only mean something with it.
void validate_epochs(const TrainConfig& c) {
  if (c.epochs == 0) {
    refuse_epoch_flags_alone(c);
  } else {
    validate_epoch_run(c);
  }
}

}  // namespace

WeightCast resolve_weight_cast(WeightCast asked, bool distributed) {
  if (asked != WeightCast::kAuto) return asked;
  return distributed ? WeightCast::kPerLayer : WeightCast::kTogether;
}

namespace {

// The run's mode, precision and the flags that refine them.
void validate_modes(const TrainConfig& c) {
  if (c.data.empty() && !c.synthetic) {
    throw UsageError("--data: required (a Food-101 root), unless --synthetic is given");
  }
  if (c.precision != Precision::kFp32 && c.device == Device::kCpu) {
    const std::string p = to_string(c.precision);
    throw UsageError("--precision " + p + ": " + p +
                     " autocast is implemented for CUDA only; use --precision fp32 with "
                     "--device cpu");
  }
  if (c.weight_cast != WeightCast::kAuto && c.precision == Precision::kFp32) {
    throw UsageError(
        "--weight-cast: only meaningful with --precision bf16 or fp16 (fp32 casts "
        "nothing)");
  }
  if (c.deterministic && c.cudnn_benchmark) {
    throw UsageError(
        "--deterministic: --cudnn-benchmark times cuDNN's algorithms in each run and may pick "
        "other ones; give one of the two");
  }
  if (c.fuse_conv_bn && c.mode != RunMode::kTrain) {
    throw UsageError("--fuse-conv-bn: only meaningful in training (--mode train)");
  }
  if (c.forward_bn != ForwardBn::kEval && c.mode != RunMode::kForward) {
    throw UsageError("--forward-bn: only meaningful with --mode forward");
  }
  if (c.cuda_graph_memsets != GraphMemsets::kKernels && !c.cuda_graph) {
    throw UsageError("--cuda-graph-memsets: only meaningful with --cuda-graph");
  }
}

// --cuda-graph: what a captured, replayed step needs.
void validate_cuda_graph(const TrainConfig& c) {
  if (!c.cuda_graph) return;
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

// --fused-bn: the build's kernels, the device and the layout they run on.
void validate_fused_bn(const TrainConfig& c) {
  if (!c.fused_bn) return;
  // First: without the kernels no other setting helps.
  require_built(Feature::kFusedBn, "--fused-bn", "fused batch norm");
  if (c.device == Device::kCpu) {
    throw UsageError("--fused-bn: cuDNN's fused batch norm needs --device cuda");
  }
  if (c.loader.transform.layout != data_pipeline::ImageLayout::kChannelsLast) {
    throw UsageError(std::string("--fused-bn: cuDNN's fused batch norm runs on NHWC tensors; needs "
                                 "--memory-format channels_last, got ") +
                     to_string(c.loader.transform.layout));
  }
}

// --decode gpu: images to decode, the device they are decoded on, the build's stage.
void validate_gpu_decode(const TrainConfig& c) {
  if (c.loader.decode != data_pipeline::DecodeDevice::kGpu) return;
  if (c.synthetic) {
    throw UsageError("--decode gpu: --synthetic reads no images; drop one of the two");
  }
  if (c.device == Device::kCpu) {
    throw UsageError("--decode gpu: decodes on the GPU the model runs on; needs --device cuda");
  }
  require_built(Feature::kGpuDecode, "--decode gpu", "GPU decode stage", "; use --decode cpu");
}

// --report and --torch-profiler-trace: writable, and not one file.
void validate_outputs(const TrainConfig& c) {
  if (!c.report.empty()) check_output_file("--report", c.report);
  if (!c.torch_profiler_trace.empty()) {
    check_output_file("--torch-profiler-trace", c.torch_profiler_trace);
    if (!c.report.empty() && same_output_file(c.report, c.torch_profiler_trace)) {
      throw UsageError("--torch-profiler-trace " + c.torch_profiler_trace +
                       ": the same file as --report " + c.report +
                       " (the trace would be lost); give each its own path");
    }
  }
}

}  // namespace

// The stages in the order their messages take precedence: the first rule broken is the one named.
void validate(const TrainConfig& c) {
  visit_train_flags(c, CheckFlagRanges{});
  validate_epochs(c);
  validate_modes(c);
  validate_cuda_graph(c);
  validate_fused_bn(c);
  if (c.device == Device::kCuda && !cuda_available()) {
    throw UsageError(
        "--device cuda: no CUDA device is available (this LibTorch build has no CUDA, or no GPU "
        "is visible); use --device cpu");
  }
  validate_gpu_decode(c);
  validate_outputs(c);
}

}  // namespace workload
