// The GPU decode stage as the step's input source (lib/input/gpu_decode_input.h): the one file of
// lib/ that compiles against data_pipeline/gpu when this build has it.
#include "lib/input/gpu_decode_input.h"

#include "lib/core/build_features.h"

#if defined(WORKLOAD_HAVE_NVJPEG)
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

#include "common/cuda_check.h"
#include "data_pipeline/gpu/gpu_decoder.h"
#include "lib/input/host_loader_input.h"
#endif

namespace workload {

namespace dp = data_pipeline;

#if defined(WORKLOAD_HAVE_NVJPEG)
namespace {

class GpuDecodeInput final : public InputSource {
 public:
  GpuDecodeInput(std::shared_ptr<const dp::Food101Index> index, const dp::LoaderOptions& options,
                 torch::Device device) {
    dp::gpu::GpuDecodeOptions gpu;
    gpu.device = device.index();
    decoder_ = std::make_unique<dp::gpu::GpuDecoder>(std::move(index), options, gpu);
  }
  ~GpuDecodeInput() override { stop(); }

  void next() override { held_ = decoder_->next(); }
  const dp::BatchInfo& info() const override { return held_; }
  StepInputs submit() override {
    // The stage wrote the batch on its own stream: the step's kernels wait for it, not the host.
    WORKLOAD_CUDA_CHECK(
        cudaStreamWaitEvent(c10::cuda::getCurrentCUDAStream().stream(), held_.ready(), 0));
    return StepInputs{held_.images(), held_.labels()};
  }
  void release_after_step() override {
    // Every kernel that reads the batch is queued now: the stage may rewrite its buffer once they
    // have run.
    auto done = std::make_shared<at::cuda::CUDAEvent>();
    done->record(c10::cuda::getCurrentCUDAStream());
    held_.release_after([done] { done->synchronize(); });
  }
  void reset() override { decoder_->reset(); }
  void reset_to(std::int64_t epoch) override { decoder_->reset(epoch); }
  void cancel() override { decoder_->cancel(); }
  void stop() override {
    held_.release();
    decoder_->stop();
  }
  std::optional<HostRingFacts> host_ring() const override {
    return ring_facts(decoder_->loader());  // the threads that read and stage the files
  }
  std::optional<GpuDecodeSummary> gpu_decode() const override {
    return GpuDecodeSummary{decoder_->info(), decoder_->stats()};
  }
  const dp::GpuDecodeInfo& decoder_info() const { return decoder_->info(); }

 private:
  std::unique_ptr<dp::gpu::GpuDecoder> decoder_;
  dp::gpu::DeviceBatch held_;  // the step's batch, released once the step's work is queued
};

}  // namespace

std::unique_ptr<InputSource> make_gpu_decode_input(std::shared_ptr<const dp::Food101Index> index,
                                                   const dp::LoaderOptions& options,
                                                   torch::Device device,
                                                   std::vector<std::string>& notices) {
  auto source = std::make_unique<GpuDecodeInput>(std::move(index), options, device);
  const dp::GpuDecodeInfo& info = source->decoder_info();
  if (!info.notice.empty()) notices.push_back(info.notice);
  if (!options.pin_memory) {
    notices.push_back(
        "--pin-memory=false: ignored with --decode gpu (the stage's transfers read the ring, which "
        "is page-locked)");
  }
  if (info.hardware) {
    notices.push_back("GPU decode: nvJPEG " + info.nvjpeg_version + ", " +
                      std::to_string(info.engines) + " hardware JPEG engines");
  }
  const std::string pinning =
      pinning_notice(options.pin_memory, source->host_ring()->pinned, device.is_cuda());
  if (!pinning.empty()) notices.push_back(pinning);
  return source;
}

#else

// The CUDA build's signature (it keeps the index); this one only refuses.
// NOLINTNEXTLINE(performance-unnecessary-value-param)
std::unique_ptr<InputSource> make_gpu_decode_input(std::shared_ptr<const dp::Food101Index>,
                                                   const dp::LoaderOptions&, torch::Device,
                                                   std::vector<std::string>&) {
  require_built(Feature::kGpuDecode, "--decode gpu", "GPU decode stage", "; use --decode cpu");
  return nullptr;  // not reached
}

#endif

}  // namespace workload
