// The machine and libraries of a run (lib/report/environment.h).
#include "lib/report/environment.h"

#include <jpeglib.h>
#include <torch/version.h>

#include <cstdio>
#include <cstdlib>
#include <opencv2/core/version.hpp>
#include <thread>

#include "lib/device/cuda_device.h"

namespace workload {

EnvironmentFacts collect_environment(bool cuda) {
  EnvironmentFacts e;
  e.libtorch = TORCH_VERSION;
  e.device = describe_device(cuda);
  e.hardware_threads = std::thread::hardware_concurrency();
  e.cuda_connections = current_cuda_connections();
  // As found in the environment: the GPU machines set NCCL_NVLS_ENABLE=0, and nothing here
  // changes it.
  if (const char* nvls = std::getenv("NCCL_NVLS_ENABLE")) e.nccl_nvls_enable = nvls;
  e.opencv = CV_VERSION;
  e.libjpeg = JPEG_LIB_VERSION;
#if defined(LIBJPEG_TURBO_VERSION_NUMBER)
  e.libjpeg_turbo = LIBJPEG_TURBO_VERSION_NUMBER;
#endif
  return e;
}

}  // namespace workload
