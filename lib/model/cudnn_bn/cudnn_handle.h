// cuDNN's handles and descriptors, owned; the checked call; the calling thread's handle.
#pragma once

#include <cudnn.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace workload::cudnn_bn {

/// Throws std::runtime_error naming the call, the source location and cuDNN's status.
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file,
                                    int line);

}  // namespace workload::cudnn_bn

/// Evaluates a cuDNN call and throws on failure.
#define WORKLOAD_CUDNN_CHECK(call)                                                                \
  do {                                                                                            \
    const cudnnStatus_t workload_cudnn_status_ = (call);                                          \
    if (workload_cudnn_status_ != CUDNN_STATUS_SUCCESS) {                                         \
      ::workload::cudnn_bn::throw_cudnn_error(workload_cudnn_status_, #call, __FILE__, __LINE__); \
    }                                                                                             \
  } while (0)

namespace workload::cudnn_bn {

/// Owns one cuDNN object `T` made by `Create` and released by `Destroy` (a handle, a tensor or an
/// activation descriptor). Move-only; the destructor never throws (a failed release is ignored: it
/// happens at teardown, when the context may be gone).
template <typename T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class CudnnOwned {
 public:
  CudnnOwned() { WORKLOAD_CUDNN_CHECK(Create(&value_)); }
  ~CudnnOwned() {
    if (value_ != nullptr) (void)Destroy(value_);
  }
  CudnnOwned(CudnnOwned&& other) noexcept : value_(std::exchange(other.value_, nullptr)) {}
  CudnnOwned& operator=(CudnnOwned&& other) noexcept {
    std::swap(value_, other.value_);
    return *this;
  }
  CudnnOwned(const CudnnOwned&) = delete;
  CudnnOwned& operator=(const CudnnOwned&) = delete;
  T get() const { return value_; }

 private:
  T value_ = nullptr;
};

using CudnnHandle = CudnnOwned<cudnnHandle_t, cudnnCreate, cudnnDestroy>;
using TensorDescriptor =
    CudnnOwned<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using ActivationDescriptor =
    CudnnOwned<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor,
               cudnnDestroyActivationDescriptor>;

/// The calling thread's handle for the current CUDA device, created on first use, bound to the
/// current CUDA stream on every call (so a capture's stream, or autograd's backward stream, gets
/// the work). One handle per thread and device: cuDNN handles are not to be shared between threads.
cudnnHandle_t current_handle();

}  // namespace workload::cudnn_bn
