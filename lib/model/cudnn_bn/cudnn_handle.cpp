// cuDNN's checked call and the calling thread's handle (lib/model/cudnn_bn/cudnn_handle.h).
#include "lib/model/cudnn_bn/cudnn_handle.h"

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include <map>

namespace workload::cudnn_bn {

void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string("cuDNN call ") + call + " failed at " + file + ":" +
                           std::to_string(line) + ": " + cudnnGetErrorString(status));
}

cudnnHandle_t current_handle() {
  // Per thread: the training thread runs forward, autograd's device thread backward.
  thread_local std::map<c10::DeviceIndex, CudnnHandle> handles;
  const c10::DeviceIndex device = c10::cuda::current_device();
  auto it = handles.find(device);
  if (it == handles.end()) it = handles.emplace(device, CudnnHandle()).first;
  WORKLOAD_CUDNN_CHECK(
      cudnnSetStream(it->second.get(), c10::cuda::getCurrentCUDAStream().stream()));
  return it->second.get();
}

}  // namespace workload::cudnn_bn
