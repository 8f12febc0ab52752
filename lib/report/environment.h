// The machine and libraries of a run, read once for its report.
#pragma once

#include "lib/report/run_facts.h"

namespace workload {

/// Reads the versions of LibTorch, CUDA, cuDNN, OpenCV and libjpeg, the device (`cuda`: the run's
/// device is a GPU) and the variables a comparison of runs needs to know
/// (CUDA_DEVICE_MAX_CONNECTIONS, NCCL_NVLS_ENABLE). The thread that set the device.
EnvironmentFacts collect_environment(bool cuda);

}  // namespace workload
