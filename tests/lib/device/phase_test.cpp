// Tests for Phase: it names the running phase while open, hands it back to the enclosing phase on a
// normal exit, keeps naming the innermost phase an exception left through, and calls its tracker's
// hook at the start of each phase.
#include "lib/device/phase.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace workload {
namespace {

TEST(PhaseTest, NamesTheRunningPhaseAndRestoresTheEnclosingOne) {
  PhaseTracker t;
  {
    Phase step(nvtx::kTorchStep, &t);
    EXPECT_STREQ(t.current, "torch_step");
    {
      Phase forward(nvtx::kForward, &t);
      EXPECT_STREQ(t.current, "forward");
    }
    EXPECT_STREQ(t.current, "torch_step");
    Phase backward(nvtx::kBackward, &t);
    EXPECT_STREQ(t.current, "backward");
  }
  EXPECT_STREQ(t.current, "");
  Phase untracked(nvtx::kZeroGrad);  // without a tracker, just the range
  EXPECT_STREQ(t.current, "");
}

TEST(PhaseTest, AnExceptionLeavesTheInnermostPhaseNamed) {
  PhaseTracker t;
  try {
    Phase step(nvtx::kTorchStep, &t);
    { Phase forward(nvtx::kForward, &t); }
    Phase backward(nvtx::kBackward, &t);
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
    EXPECT_STREQ(t.current, "backward");
  }
  // A phase opened while an exception is already in flight (a destructor's) still restores.
  struct Unwinder {
    PhaseTracker* t;
    ~Unwinder() { Phase cleanup(nvtx::kCaptureDrain, t); }
  };
  t.current = "";
  try {
    Phase step(nvtx::kTorchStep, &t);
    Unwinder u{&t};
    Phase h2d(nvtx::kH2dSubmit, &t);
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
    EXPECT_STREQ(t.current, "h2d_submit");
  }
}

TEST(PhaseTest, TheHookRunsAtTheStartOfEachPhaseInsideIt) {
  PhaseTracker t;
  std::vector<std::string> entered;
  t.on_enter = [&](const char* name) {
    EXPECT_STREQ(t.current, name);  // the phase is already the running one
    entered.emplace_back(name);
  };
  {
    Phase step(nvtx::kTorchStep, &t);
    Phase data(nvtx::kDataLoad, &t);
    { Phase wait(nvtx::kBatchWait, &t); }
  }
  EXPECT_EQ(entered, (std::vector<std::string>{"torch_step", "data_load", "batch_wait"}));
  // A hook that throws fails its phase: the error is seen as raised inside it.
  t.on_enter = [](const char* name) {
    if (std::string(name) == "forward") throw std::runtime_error("stall failed");
  };
  try {
    Phase step(nvtx::kTorchStep, &t);
    Phase forward(nvtx::kForward, &t);
    FAIL() << "expected the hook's error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "stall failed");
    EXPECT_STREQ(t.current, "forward");
  }
}

}  // namespace
}  // namespace workload
