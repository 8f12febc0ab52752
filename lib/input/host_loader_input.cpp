// The host loader as the step's input source (lib/input/host_loader_input.h).
#include "lib/input/host_loader_input.h"

#if defined(WORKLOAD_TORCH_CUDA)
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace workload {

namespace dp = data_pipeline;

#if defined(WORKLOAD_TORCH_CUDA)
struct HostLoaderInput::CopyStream {
  c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/true);
};
#else
struct HostLoaderInput::CopyStream {};
#endif

HostLoaderInput::HostLoaderInput(std::shared_ptr<const dp::Food101Index> index,
                                 const dp::LoaderOptions& options, torch::Device device,
                                 bool copy_stream)
    : device_(device) {
  if (device_.is_cuda() && copy_stream) copy_stream_ = std::make_unique<CopyStream>();
  loader_ = std::make_unique<dp::Loader>(std::move(index), options);
}

// Stop the workers before the streams go: a worker may be waiting on a fence that references a
// CUDA event.
HostLoaderInput::~HostLoaderInput() { stop(); }

std::optional<HostRingFacts> HostLoaderInput::host_ring() const { return ring_facts(*loader_); }

StepInputs HostLoaderInput::submit() {
  StepInputs in;
  if (!device_.is_cuda()) {
    // The model will read these until backward: copy them out of the ring, as .to(cuda) would.
    in.images = batch_.images().clone();
    in.labels = batch_.labels().clone();
    batch_.release();
    return in;
  }
#if defined(WORKLOAD_TORCH_CUDA)
  const auto step_stream = c10::cuda::getCurrentCUDAStream();
  auto done = std::make_shared<at::cuda::CUDAEvent>();
  const auto opts = torch::TensorOptions().device(device_);
  if (copy_stream_) {
    {
      c10::cuda::CUDAStreamGuard guard(copy_stream_->stream);
      in.images = batch_.images().to(opts, /*non_blocking=*/true);
      in.labels = batch_.labels().to(opts, /*non_blocking=*/true);
      done->record(copy_stream_->stream);
    }
    done->block(step_stream);  // the step's kernels wait for the copies, not the host
    // The copies' memory belongs to the copy stream's pool: keep it until the step is done too.
    in.images.record_stream(step_stream);
    in.labels.record_stream(step_stream);
  } else {
    in.images = batch_.images().to(opts, /*non_blocking=*/true);
    in.labels = batch_.labels().to(opts, /*non_blocking=*/true);
    done->record(step_stream);
  }
  // The slot is rewritten only after the copies that read it have finished.
  batch_.release_after([done] { done->synchronize(); });
#endif
  return in;
}

HostRingFacts ring_facts(const dp::Loader& loader) {
  HostRingFacts f;
  f.slots = loader.ring_slots();
  f.bytes = loader.ring_bytes();
  f.pinned = loader.pinned();
  f.batches_per_epoch = loader.batches_per_epoch();
  f.images_skipped = loader.stats().images_skipped;
  return f;
}

}  // namespace workload
