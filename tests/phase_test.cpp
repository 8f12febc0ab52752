// Tests for Phase: it names the running phase while open, hands it back to the enclosing phase on a
// normal exit, and keeps naming the innermost phase an exception left through.
#include "lib/phase.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace workload {
namespace {

TEST(PhaseTest, NamesTheRunningPhaseAndRestoresTheEnclosingOne) {
  const char* current = "";
  {
    Phase step(nvtx::kTorchStep, &current);
    EXPECT_STREQ(current, "torch_step");
    {
      Phase forward(nvtx::kForward, &current);
      EXPECT_STREQ(current, "forward");
    }
    EXPECT_STREQ(current, "torch_step");
    Phase backward(nvtx::kBackward, &current);
    EXPECT_STREQ(current, "backward");
  }
  EXPECT_STREQ(current, "");
  Phase untracked(nvtx::kZeroGrad);  // without a record, just the range
  EXPECT_STREQ(current, "");
}

TEST(PhaseTest, AnExceptionLeavesTheInnermostPhaseNamed) {
  const char* current = "";
  try {
    Phase step(nvtx::kTorchStep, &current);
    { Phase forward(nvtx::kForward, &current); }
    Phase backward(nvtx::kBackward, &current);
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
    EXPECT_STREQ(current, "backward");
  }
  // A phase opened while an exception is already in flight (a destructor's) still restores.
  struct Unwinder {
    const char** current;
    ~Unwinder() { Phase cleanup(nvtx::kCaptureDrain, current); }
  };
  current = "";
  try {
    Phase step(nvtx::kTorchStep, &current);
    Unwinder u{&current};
    Phase h2d(nvtx::kH2dSubmit, &current);
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
    EXPECT_STREQ(current, "h2d_submit");
  }
}

}  // namespace
}  // namespace workload
