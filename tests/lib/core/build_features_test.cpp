// Tests for the one answer to "is X built?": a feature is built exactly when it has no reason to be
// missing, the usage error names the flag, the part and the reason, and the answers agree with
// what the build compiled in (LibTorch's CUDA, the c10d backends).
#include "lib/core/build_features.h"

#include <gtest/gtest.h>

#include "lib/core/usage_error.h"

namespace workload {
namespace {

constexpr Feature kAll[] = {Feature::kCuda,    Feature::kGpuDecode,
                            Feature::kFusedBn, Feature::kGraphMemsetRewrite,
                            Feature::kGloo,    Feature::kNccl};

TEST(BuildFeaturesTest, BuiltMeansNoReasonToBeMissing) {
  for (const Feature f : kAll) EXPECT_EQ(built(f), missing_reason(f).empty());
}

TEST(BuildFeaturesTest, TheUsageErrorNamesTheFlagThePartAndWhy) {
  for (const Feature f : kAll) {
    if (built(f)) {
      EXPECT_NO_THROW(require_built(f, "--flag", "part"));
      continue;
    }
    try {
      require_built(f, "--flag", "part", "; use --other");
      FAIL() << "a missing feature must be refused";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()),
                "--flag: this build has no part (" + missing_reason(f) + "); use --other");
    }
  }
}

TEST(BuildFeaturesTest, TheAnswersFollowWhatWasCompiled) {
#if defined(WORKLOAD_TORCH_CUDA)
  EXPECT_TRUE(built(Feature::kCuda));
#else
  EXPECT_FALSE(built(Feature::kCuda));
  EXPECT_EQ(missing_reason(Feature::kCuda), "LibTorch without CUDA");
  // Every GPU part needs a CUDA LibTorch.
  EXPECT_FALSE(built(Feature::kGpuDecode));
  EXPECT_FALSE(built(Feature::kFusedBn));
  EXPECT_FALSE(built(Feature::kGraphMemsetRewrite));
  EXPECT_FALSE(built(Feature::kNccl));
#endif
}

}  // namespace
}  // namespace workload
