// Small CUDA-side helpers for the trainer (lib/device/cuda_device.h).
#include "lib/device/cuda_device.h"

#include <torch/cuda.h>

#include <cstdio>
#include <string>

#if defined(WORKLOAD_TORCH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/detail/CUDAHooks.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_profiler_api.h>

#include "common/cuda_check.h"
#endif

namespace workload {

bool cuda_available() {
#if defined(WORKLOAD_TORCH_CUDA)
  return torch::cuda::is_available();
#else
  return false;
#endif
}

void device_synchronize() {
#if defined(WORKLOAD_TORCH_CUDA)
  if (cuda_available()) WORKLOAD_CUDA_CHECK(cudaDeviceSynchronize());
#endif
}

void use_cuda_device(int index, bool cudnn_benchmark, bool deterministic) {
#if defined(WORKLOAD_TORCH_CUDA)
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
  at::globalContext().setBenchmarkCuDNN(cudnn_benchmark);
  at::globalContext().setDeterministicCuDNN(deterministic);
#else
  (void)index;
  (void)cudnn_benchmark;
  (void)deterministic;
#endif
}

#if defined(WORKLOAD_TORCH_CUDA)
struct StepStream::Guard {
  c10::cuda::CUDAStreamGuard guard{c10::cuda::getStreamFromPool(/*isHighPriority=*/true)};
};
#else
struct StepStream::Guard {};
#endif

StepStream::StepStream(bool enabled) {
  if (enabled) guard_ = std::make_unique<Guard>();
}

StepStream::~StepStream() = default;

void ProfilerCapture::start() {
  if (!enabled_ || started_) return;
#if defined(WORKLOAD_TORCH_CUDA)
  WORKLOAD_CUDA_CHECK(cudaProfilerStart());
#endif
  started_ = true;
}

void ProfilerCapture::stop() {
  if (!enabled_ || !started_ || stopped_) return;
  stopped_ = true;
#if defined(WORKLOAD_TORCH_CUDA)
  WORKLOAD_CUDA_CHECK(cudaProfilerStop());
#endif
}

ProfilerCapture::~ProfilerCapture() {
  if (!enabled_ || !started_ || stopped_) return;
  stopped_ = true;
#if defined(WORKLOAD_TORCH_CUDA)
  // Let queued work finish so the report holds it, then end the capture; never throw here.
  WORKLOAD_CUDA_CHECK_NOTHROW(cudaDeviceSynchronize());
  WORKLOAD_CUDA_CHECK_NOTHROW(cudaProfilerStop());
#endif
}

DeviceDescription describe_device(bool cuda) {
  DeviceDescription d;
  d.device_name = "cpu";
#if defined(WORKLOAD_TORCH_CUDA)
  int v = 0;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) {
    d.cuda_runtime = std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  }
  if (cudaDriverGetVersion(&v) == cudaSuccess) {
    d.cuda_driver = std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  }
  (void)cudaGetLastError();
  if (cuda && cuda_available()) {
    const long cudnn = at::detail::getCUDAHooks().versionCuDNN();
    if (cudnn > 0) {
      // cuDNN 9 encodes major * 10000 + minor * 100 + patch; cuDNN 8, major * 1000 + minor * 100.
      const long major = cudnn >= 90000 ? cudnn / 10000 : cudnn / 1000;
      const long rest = cudnn >= 90000 ? cudnn % 10000 : cudnn % 1000;
      d.cudnn = std::to_string(major) + "." + std::to_string(rest / 100) + "." +
                std::to_string(rest % 100);
    }
    const cudaDeviceProp* p = at::cuda::getCurrentDeviceProperties();
    d.device_name = p->name;
    d.multiprocessors = p->multiProcessorCount;
    d.memory_gib = static_cast<double>(p->totalGlobalMem) / (1024.0 * 1024.0 * 1024.0);
  }
#else
  (void)cuda;
#endif
  return d;
}

}  // namespace workload
