// Tests for --inject-stall: a stall must name a range of the run's captured step and a captured
// step; StallInjector sleeps only in its phase of its captured step, never in warm-up, records what
// it made in order, and a stop request cuts a sleep short.
#include "lib/run/stall_injector.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "lib/core/usage_error.h"
#include "lib/device/cuda_device.h"

namespace workload {
namespace {

using Clock = std::chrono::steady_clock;

double ms_of(const std::function<void()>& f) {
  const auto t = Clock::now();
  f();
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

void expect_refused(const TrainConfig& c, const std::string& fragment) {
  try {
    check_stalls(c);
    FAIL() << "expected a UsageError containing '" << fragment << "'";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(StallInjectorTest, AStallMustNameARangeOfTheCapturedStepAndACapturedStep) {
  TrainConfig c;
  c.device = Device::kCpu;
  c.steps = 4;
  c.inject_stall = {{"forward", 3, 10}};
  EXPECT_NO_THROW(check_stalls(c));
  c.inject_stall = {{"forward", 4, 10}};
  expect_refused(c, "--inject-stall forward@4:10: STEP must be a captured step, 0 to 3");
  c.inject_stall = {{"normalize", 0, 10}};  // only with --host-dtype uint8
  expect_refused(c, "PHASE must be one of this run's step ranges");
  c.loader.transform.dtype = data_pipeline::HostDType::kUInt8;
  EXPECT_NO_THROW(check_stalls(c));
  c.mode = RunMode::kForward;
  c.inject_stall = {{"backward", 0, 10}};
  expect_refused(c, "got 'backward'");
  // A graph's captured step: only the host's ranges, graph_replay holding the device work.
  c = TrainConfig{};
  c.cuda_graph = true;
  c.steps = 4;
  c.inject_stall = {{"graph_replay", 3, 10}};
  EXPECT_NO_THROW(check_stalls(c));
  c.inject_stall = {{"forward", 3, 10}};
  expect_refused(c,
                 "PHASE must be one of this run's step ranges (data_load, batch_wait, h2d_submit, "
                 "graph_replay), got 'forward'");
}

TEST(StallInjectorTest, SleepsInItsPhaseOfItsCapturedStepOnly) {
  StopControl stop;
  StallInjector stalls({{"forward", 1, 80.0}, {"batch_wait", 1, 40.0}}, stop);
  std::vector<InjectedStall> made;
  stalls.begin_step(1, /*warmup=*/true, &made);  // warm-up step 1: never
  EXPECT_LT(ms_of([&] { stalls.at("forward"); }), 40.0);
  EXPECT_TRUE(made.empty());
  stalls.begin_step(0, false, &made);  // another captured step
  EXPECT_LT(ms_of([&] { stalls.at("forward"); }), 40.0);
  stalls.begin_step(1, false, &made);
  EXPECT_LT(ms_of([&] { stalls.at("backward"); }), 40.0);  // another phase
  EXPECT_GE(ms_of([&] { stalls.at("batch_wait"); }), 40.0);
  EXPECT_GE(ms_of([&] { stalls.at("forward"); }), 80.0);
  ASSERT_EQ(made.size(), 2u);  // in the order the step ran them
  EXPECT_EQ(made[0].phase, "batch_wait");
  EXPECT_EQ(made[1].phase, "forward");
  EXPECT_EQ(made[1].ms, 80.0);
}

TEST(StallInjectorTest, AStopRequestCutsTheSleepShort) {
  StopControl stop;
  StallInjector stalls({{"forward", 0, 60000.0}}, stop);
  std::vector<InjectedStall> made;
  stalls.begin_step(0, false, &made);
  std::thread requester([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stop.request(SIGTERM);
  });
  EXPECT_LT(ms_of([&] { stalls.at("forward"); }), 10000.0);
  requester.join();
  EXPECT_EQ(made.size(), 1u);  // it was made, shorter
}

}  // namespace
}  // namespace workload
