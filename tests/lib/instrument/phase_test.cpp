// Tests for Phase: it names the running phase while open, hands it back to the enclosing phase on a
// normal exit, keeps naming the innermost phase an exception left through, and calls its tracker's
// hook at the start of each phase, and records each phase's host time when asked.
#include "lib/instrument/phase.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
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

// With times asked for, each phase opened records its name when it opens and its host wall time
// when it closes, an exception's unwinding included; the phases opened before the timing began
// record nothing.
TEST(PhaseTest, PhasesRecordTheirHostTimeInTheOrderTheyOpened) {
  PhaseTracker t;
  PhaseTimes times;
  try {
    Phase step(nvtx::kTorchStep, &t);
    const PhaseTiming timing(t, times);
    {
      Phase data(nvtx::kDataLoad, &t);
      Phase wait(nvtx::kBatchWait, &t);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Phase forward(nvtx::kForward, &t);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(t.times, nullptr) << "the timing ended with its scope";
  ASSERT_EQ(times.size(), 3u);
  EXPECT_STREQ(times[0].first, "data_load");
  EXPECT_STREQ(times[1].first, "batch_wait");
  EXPECT_STREQ(times[2].first, "forward");
  EXPECT_GE(times[1].second, 20.0);
  EXPECT_GE(times[0].second, times[1].second);  // data_load holds batch_wait
  EXPECT_GE(times[2].second, 10.0);             // closed by the exception, still timed
  Phase untimed(nvtx::kBackward, &t);
  EXPECT_EQ(times.size(), 3u);
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
