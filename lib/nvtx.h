// The training step's NVTX vocabulary and the scoped range that emits it.
#pragma once

#include <nvtx3/nvToolsExt.h>

#include <atomic>

namespace workload::nvtx {

// Range names are an interface: scripts/analyze.py and Nsight Compute filters parse them.
inline constexpr const char* kTorchStep = "torch_step";
inline constexpr const char* kDataLoad = "data_load";
inline constexpr const char* kBatchWait = "batch_wait";
inline constexpr const char* kH2dSubmit = "h2d_submit";
inline constexpr const char* kNormalize = "normalize";
inline constexpr const char* kForward = "forward";
inline constexpr const char* kZeroGrad = "zero_grad";
inline constexpr const char* kBackward = "backward";
inline constexpr const char* kOptimizerStep = "optimizer_step";
inline constexpr const char* kCaptureWindow = "capture_window";
inline constexpr const char* kIteratorReset = "iterator_reset";
inline constexpr const char* kCaptureDrain = "capture_drain";
inline constexpr const char* kLossItem = "loss_item";  // --sync-every-step only

/// Process-wide switch, on by default; off turns every Range into a no-op so the cost of the
/// instrumentation itself can be measured (train_resnet50 --nvtx=false).
inline std::atomic<bool>& enabled() {
  static std::atomic<bool> on{true};
  return on;
}

/// Pushes/pops a range with an arbitrary (e.g. per-layer) name when ranges are enabled; for the
/// --nvtx-detail hooks, whose scopes are not C++ scopes. Pair every push with a pop.
inline void push(const char* name) {
  if (enabled().load(std::memory_order_relaxed)) nvtxRangePushA(name);
}
inline void pop() {
  if (enabled().load(std::memory_order_relaxed)) nvtxRangePop();
}

/// A push/pop range in NVTX's default domain with an ASCII message, exactly what PyTorch's
/// torch.cuda.nvtx.range emits, so Nsight Systems shows ":torch_step" in both workloads. Closes
/// on the thread and in the scope where it was opened: neither copyable nor movable.
class Range {
 public:
  explicit Range(const char* name) noexcept : active_(enabled().load(std::memory_order_relaxed)) {
    if (active_) nvtxRangePushA(name);
  }
  ~Range() {
    if (active_) nvtxRangePop();
  }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
  Range(Range&&) = delete;
  Range& operator=(Range&&) = delete;

 private:
  bool active_;
};

}  // namespace workload::nvtx
