// The one answer to "is X built?": the optional parts of this build, and why each one missing is.
#pragma once

#include <string>

namespace workload {

/// The parts of the program that CMake leaves out when their dependencies are missing (the top
/// CMakeLists.txt finds them and says which in its status line).
enum class Feature {
  kCuda,                ///< LibTorch with CUDA (Debian's 1.13 has none)
  kGpuDecode,           ///< --decode gpu: data_pipeline/gpu (nvJPEG, a CUDA compiler)
  kFusedBn,             ///< --fused-bn: lib/model/cudnn_bn (cuDNN's legacy batch-norm Ex API)
  kGraphMemsetRewrite,  ///< --cuda-graph-memsets kernels: lib/step/graph (nvcc, LibTorch >= 2.8)
  kGloo,                ///< c10d's CPU backend (Gloo's headers)
  kNccl,                ///< c10d's GPU backend (a CUDA LibTorch and NCCL's headers)
};

/// True when this build carries `feature`.
bool built(Feature feature);

/// Why this build lacks `feature` ("no nvJPEG in the CUDA toolkit"), or "" when it has it.
std::string missing_reason(Feature feature);

/// \throws UsageError "<flag>: this build has no <what> (<why>)<advice>" when `feature` is
///         missing; `advice` (e.g. "; use --decode cpu") is appended as given.
void require_built(Feature feature, const std::string& flag, const std::string& what,
                   const std::string& advice = {});

}  // namespace workload
