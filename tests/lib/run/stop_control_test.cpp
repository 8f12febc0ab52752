// Tests for StopControl in a single process: the first request wins, cancel hooks run on the
// requesting thread, a boundary stops after a request, and sleeps end early on one.
#include "lib/run/stop_control.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

namespace workload {
namespace {

using Clock = std::chrono::steady_clock;

TEST(StopControlTest, TheFirstRequestWinsAndEveryOneCancels) {
  StopControl stop;
  int cancels = 0;
  stop.add_cancel_hook([&] { ++cancels; });
  EXPECT_EQ(stop.requested(), -1);
  EXPECT_EQ(stop.signal(), -1);
  EXPECT_FALSE(stop.at_boundary());
  stop.request(SIGTERM);
  stop.request(SIGINT);
  EXPECT_EQ(stop.requested(), SIGTERM);
  EXPECT_EQ(stop.signal(), SIGTERM);
  EXPECT_EQ(cancels, 2);  // cancelling is idempotent: a later request may find a later wait
  EXPECT_TRUE(stop.at_boundary());
  EXPECT_EQ(stop.agreed_by(), "");  // a single process agrees with nobody
}

TEST(StopControlTest, StepsAreCounted) {
  StopControl stop;
  EXPECT_EQ(stop.steps_started(), 0);
  stop.step_done();
  stop.step_done();
  EXPECT_EQ(stop.steps_started(), 2);
}

TEST(StopControlTest, ASleepRunsItsLengthWithoutARequest) {
  StopControl stop;
  const auto t = Clock::now();
  EXPECT_FALSE(stop.sleep_for(std::chrono::milliseconds(50)));
  EXPECT_GE(Clock::now() - t, std::chrono::milliseconds(50));
}

TEST(StopControlTest, ARequestFromAnotherThreadCutsASleepShort) {
  StopControl stop;
  std::thread requester([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stop.request(SIGTERM);
  });
  const auto t = Clock::now();
  EXPECT_TRUE(stop.sleep_for(std::chrono::seconds(60)));
  requester.join();
  EXPECT_LT(Clock::now() - t, std::chrono::seconds(10));
  // Once requested, a sleep does not start at all.
  const auto t2 = Clock::now();
  EXPECT_TRUE(stop.sleep_for(std::chrono::seconds(60)));
  EXPECT_LT(Clock::now() - t2, std::chrono::seconds(1));
}

}  // namespace
}  // namespace workload
