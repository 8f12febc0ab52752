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
  // Per thread: the training thread runs forward, autograd's device thread backward. Never
  // destroyed, as LibTorch's own pool of cuDNN handles: the main thread's would be destroyed at the
  // program's exit, and cudnnDestroy crashed there (resnet50_test and norm_activation_test ended
  // in a segmentation fault after their last case, in cudnnDestroy under __call_tls_dtors, on an
  // H100 and an H200). A handle a thread and device, for the threads a run keeps.
  thread_local auto* const handles = new std::map<c10::DeviceIndex, CudnnHandle>();
  const c10::DeviceIndex device = c10::cuda::current_device();
  auto it = handles->find(device);
  if (it == handles->end()) it = handles->emplace(device, CudnnHandle()).first;
  WORKLOAD_CUDNN_CHECK(
      cudnnSetStream(it->second.get(), c10::cuda::getCurrentCUDAStream().stream()));
  return it->second.get();
}

}  // namespace workload::cudnn_bn
