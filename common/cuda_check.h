// One checked way to call the CUDA runtime: a throwing check for normal code, a logging one for
// destructors. Only meaningful in builds where LibTorch carries CUDA (WORKLOAD_TORCH_CUDA).
#pragma once

#if defined(WORKLOAD_TORCH_CUDA)
#include <cuda_runtime_api.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace common {

/// Throws std::runtime_error naming the call, the source location and the CUDA error.
[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* file,
                                          int line) {
  throw std::runtime_error(std::string("CUDA call ") + call + " failed at " + file + ":" +
                           std::to_string(line) + ": " + cudaGetErrorName(err) + " (" +
                           cudaGetErrorString(err) + ")");
}

/// Logs instead of throwing: for destructors and teardown paths.
inline void log_cuda_error(cudaError_t err, const char* call, const char* file, int line) noexcept {
  std::fprintf(stderr, "warning: CUDA call %s failed at %s:%d: %s\n", call, file, line,
               cudaGetErrorName(err));
}

}  // namespace common

/// Evaluates a CUDA runtime call and throws on failure.
#define WORKLOAD_CUDA_CHECK(call)                                                \
  do {                                                                           \
    const cudaError_t workload_cuda_err_ = (call);                               \
    if (workload_cuda_err_ != cudaSuccess) {                                     \
      ::common::throw_cuda_error(workload_cuda_err_, #call, __FILE__, __LINE__); \
    }                                                                            \
  } while (0)

/// Evaluates a CUDA runtime call and logs a failure without throwing (destructors).
#define WORKLOAD_CUDA_CHECK_NOTHROW(call)                                      \
  do {                                                                         \
    const cudaError_t workload_cuda_err_ = (call);                             \
    if (workload_cuda_err_ != cudaSuccess) {                                   \
      ::common::log_cuda_error(workload_cuda_err_, #call, __FILE__, __LINE__); \
    }                                                                          \
  } while (0)

#endif  // WORKLOAD_TORCH_CUDA
