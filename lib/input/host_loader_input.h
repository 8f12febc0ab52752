// The host loader as the step's input source: batches decoded by loader threads into the host
// ring, copied to the device on a copy stream.
#pragma once

#include <memory>

#include "data_pipeline/loader.h"
#include "lib/input/input_source.h"

namespace workload {

/// Feeds the step from a data_pipeline::Loader. On a CUDA device submit() copies the batch with
/// non-blocking copies, on a copy stream of its own (`copy_stream`; the step's kernels wait for
/// the copies, not the host) or on the current stream, and releases the ring slot behind an event
/// after the copies. On the CPU it copies the batch out of the ring, as .to(cuda) would.
/// Thread-safety: InputSource's.
class HostLoaderInput final : public InputSource {
 public:
  /// Starts the loader's threads. \throws as data_pipeline::Loader's constructor.
  HostLoaderInput(std::shared_ptr<const data_pipeline::Food101Index> index,
                  const data_pipeline::LoaderOptions& options, torch::Device device,
                  bool copy_stream);
  ~HostLoaderInput() override;

  void next() override { batch_ = loader_->next(); }
  const data_pipeline::BatchInfo& info() const override { return batch_; }
  StepInputs submit() override;
  void reset() override { loader_->reset(); }
  void reset_to(std::int64_t epoch) override { loader_->reset_to(epoch); }
  void cancel() override { loader_->cancel(); }
  void stop() override { loader_->stop(); }
  std::optional<HostRingFacts> host_ring() const override;

 private:
  struct CopyStream;  // the side stream (CUDA builds)
  torch::Device device_;
  std::unique_ptr<CopyStream> copy_stream_;  // null: copies on the current stream
  std::unique_ptr<data_pipeline::Loader> loader_;
  data_pipeline::Batch batch_;  // taken by next(), released by submit()
};

/// The ring facts of `loader` (also the GPU stage's, whose threads fill one).
HostRingFacts ring_facts(const data_pipeline::Loader& loader);

}  // namespace workload
