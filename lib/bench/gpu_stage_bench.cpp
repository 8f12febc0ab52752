// The GPU decode stage alone, for loader_bench (lib/bench/loader_bench.h): the one file of
// lib/bench that compiles against data_pipeline/gpu when this build has it.
#include "lib/bench/loader_bench.h"

#include "lib/core/build_features.h"

#if defined(WORKLOAD_HAVE_NVJPEG)
#include <cuda_runtime_api.h>

#include <stdexcept>

#include "data_pipeline/gpu/gpu_decoder.h"
#endif

namespace workload::bench {

namespace dp = data_pipeline;

#if defined(WORKLOAD_HAVE_NVJPEG)
LoaderRun run_gpu_stage(const std::shared_ptr<const dp::Food101Index>& index,
                        dp::LoaderOptions options, int warmup, int batches, std::string* notice) {
  options.decode = dp::DecodeDevice::kGpu;
  dp::gpu::GpuDecoder stage(index, options);
  *notice = stage.info().notice;
  for (int i = 0; i < warmup; ++i) {
    dp::gpu::DeviceBatch b = stage.next();
    cudaEventSynchronize(b.ready());
  }
  const dp::GpuDecodeStats before = stage.stats();
  LoaderRun r = time_batches(batches, [&](bool last) {
    dp::gpu::DeviceBatch b = stage.next();
    if (last && cudaEventSynchronize(b.ready()) != cudaSuccess) {
      throw std::runtime_error("GPU decode stage: the last batch failed on the device");
    }
    return b.size();
  });
  const dp::GpuDecodeStats after = stage.stats();
  r.hardware_images = after.hardware_images - before.hardware_images;
  r.fallback_images = after.fallback_images - before.fallback_images;
  return r;
}
#else
LoaderRun run_gpu_stage(const std::shared_ptr<const dp::Food101Index>&, dp::LoaderOptions, int, int,
                        std::string*) {
  require_built(Feature::kGpuDecode, "--decode gpu", "GPU decode stage");
  return {};  // not reached
}
#endif

}  // namespace workload::bench
