// The optional parts of this build (lib/core/build_features.h): the one file that reads CMake's
// verdicts, given to it as WORKLOAD_MISSING_<FEATURE> (the reason, empty when the part is built).
#include "lib/core/build_features.h"

#include "lib/core/usage_error.h"

namespace workload {

std::string missing_reason(Feature feature) {
  // Each branch is CMake's reason for its part: several are the same "" when those parts are built.
  // NOLINTBEGIN(bugprone-branch-clone)
  switch (feature) {
    case Feature::kCuda:
      return WORKLOAD_MISSING_CUDA;
    case Feature::kGpuDecode:
      return WORKLOAD_MISSING_GPU_DECODE;
    case Feature::kFusedBn:
      return WORKLOAD_MISSING_FUSED_BN;
    case Feature::kGraphMemsetRewrite:
      return WORKLOAD_MISSING_GRAPH_REWRITE;
    case Feature::kGloo:
      return WORKLOAD_MISSING_GLOO;
    case Feature::kNccl:
      return WORKLOAD_MISSING_NCCL;
  }
  // NOLINTEND(bugprone-branch-clone)
  return "unknown feature";
}

bool built(Feature feature) { return missing_reason(feature).empty(); }

void require_built(Feature feature, const std::string& flag, const std::string& what,
                   const std::string& advice) {
  const std::string why = missing_reason(feature);
  if (why.empty()) return;
  throw UsageError(flag + ": this build has no " + what + " (" + why + ")" + advice);
}

}  // namespace workload
