// The program's NVTX vocabulary (the training step's ranges in the default domain, beside the
// loader's in the data_pipeline domain) and the scoped range that emits the step's.
#pragma once

#include <nvtx3/nvtx3.hpp>

#include "data_pipeline/nvtx_domain.h"

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
// --cuda-graph: the step's device work replayed from one CUDA graph (in place of normalize,
// forward, zero_grad, backward and optimizer_step), and the one capture after the warm-up, before
// the window.
inline constexpr const char* kGraphReplay = "graph_replay";
inline constexpr const char* kGraphCapture = "graph_capture";
// --epochs: an epoch's end, between its last step and the next epoch's first, on the main thread:
// the evaluation pass over the test split, eval { eval_step { batch_wait, h2d_submit, [normalize],
// forward }..., eval_reduce } (eval_reduce: the device's counts read, summed over the ranks), then
// the checkpoint written (--checkpoint-dir). Neither is a torch_step.
inline constexpr const char* kEval = "eval";
inline constexpr const char* kEvalStep = "eval_step";
inline constexpr const char* kEvalReduce = "eval_reduce";
inline constexpr const char* kCheckpoint = "checkpoint";

// The loader's ranges, on its worker threads in the data_pipeline domain (defined there, since
// data_pipeline cannot see lib/): a worker filling a whole batch or one sample, and waiting for the
// device to release a slot before rewriting it.
using data_pipeline::nvtx::kDomain;
using data_pipeline::nvtx::kLoadBatch;
using data_pipeline::nvtx::kLoadSample;
using data_pipeline::nvtx::kReuseFence;
// --decode gpu: the GPU stage's ranges, on its thread `loader/gpu` in the same domain.
using data_pipeline::nvtx::kDecodeFallback;
using data_pipeline::nvtx::kGpuDecode;
using data_pipeline::nvtx::kResizeNormalize;

// Data parallelism's own ranges, on the main thread in the `ddp` domain (so the step tree in the
// default domain is the same with and without it): the buffer broadcast and the bucket rebuild
// (both inside `forward`, as in PyTorch's DDP), the stop agreement at a step boundary, and the
// barrier before the capture starts. The gradient all-reduces run inside `backward`, launched from
// autograd's thread; NCCL marks them in its own `NCCL` domain.
inline constexpr const char* kDdpDomain = "ddp";
inline constexpr const char* kBroadcastBuffers = "broadcast_buffers";
inline constexpr const char* kRebuildBuckets = "rebuild_buckets";
inline constexpr const char* kStopAgreement = "stop_agreement";
inline constexpr const char* kCaptureBarrier = "capture_barrier";

// --inject-stall: inside the phase range it stalls, on the main thread, a range `inject_stall` in
// its own domain holds the device drain and the sleep (so the idle gap the capture shows is the
// sleep, whatever the host's lead over the device was; analyze.py excuses that drain).
inline constexpr const char* kStallDomain = "inject_stall";
inline constexpr const char* kInjectStall = "inject_stall";

/// The process-wide switch for every range and NVTX thread name of the program, both domains (on
/// by default; train_resnet50 --nvtx=false measures the cost of the instrumentation itself).
using data_pipeline::nvtx::enabled;
using data_pipeline::nvtx::set_enabled;

/// Pushes/pops a range with an arbitrary (e.g. per-layer) name when ranges are enabled; for the
/// --nvtx-detail hooks, whose scopes are not C++ scopes. Pair every push with a pop.
inline void push(const char* name) {
  if (enabled()) nvtxRangePushA(name);
}
inline void pop() {
  if (enabled()) nvtxRangePop();
}

/// A push/pop range in NVTX's default domain with an ASCII message, exactly what PyTorch's
/// torch.cuda.nvtx.range emits, so Nsight Systems shows ":torch_step" in both workloads. Closes
/// on the thread and in the scope where it was opened: neither copyable nor movable.
class Range {
 public:
  explicit Range(const char* name) noexcept : active_(enabled()) {
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

/// A push/pop range in the NVTX domain `Domain::name` (or nothing when NVTX is off). Neither
/// copyable nor movable.
template <typename Domain>
class DomainRange {
 public:
  explicit DomainRange(const char* name) noexcept : active_(enabled()) {
    if (active_) {
      nvtxDomainRangePushEx(nvtx3::domain::get<Domain>(),
                            nvtx3::event_attributes{nvtx3::message{name}}.get());
    }
  }
  ~DomainRange() {
    if (active_) nvtxDomainRangePop(nvtx3::domain::get<Domain>());
  }
  DomainRange(const DomainRange&) = delete;
  DomainRange& operator=(const DomainRange&) = delete;
  DomainRange(DomainRange&&) = delete;
  DomainRange& operator=(DomainRange&&) = delete;

 private:
  bool active_;
};

struct DdpDomain {
  static constexpr const char* name{kDdpDomain};
};
struct StallDomain {
  static constexpr const char* name{kStallDomain};
};
/// A range in the `ddp` domain.
using DdpRange = DomainRange<DdpDomain>;
/// A range in the `inject_stall` domain.
using StallRange = DomainRange<StallDomain>;

}  // namespace workload::nvtx
