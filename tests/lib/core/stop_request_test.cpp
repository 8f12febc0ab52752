// Tests for the process's stop request: signals named for messages, the first request wins, an
// interruption wakes a sleep without a request.
#include "lib/core/stop_request.h"

#include <gtest/gtest.h>

#include <csignal>
#include <thread>

namespace workload {
namespace {

using Clock = std::chrono::steady_clock;

TEST(StopRequestTest, SignalsAreNamed) {
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGINT), "SIGINT");
  EXPECT_EQ(signal_name(0), "none");
  EXPECT_EQ(signal_name(SIGHUP), "SIGHUP");  // a stop like SIGTERM's (lib/core/signals.h)
  EXPECT_EQ(signal_name(SIGUSR1), "signal " + std::to_string(SIGUSR1));
}

TEST(StopRequestTest, TheFirstRequestWins) {
  StopRequest stop;
  EXPECT_EQ(stop.requested(), -1);
  stop.request(SIGINT);
  stop.request(SIGTERM);
  EXPECT_EQ(stop.requested(), SIGINT);
  EXPECT_FALSE(stop.interrupted());
}

TEST(StopRequestTest, AnInterruptionCutsASleepShortWithoutARequest) {
  StopRequest stop;
  std::thread interrupter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stop.interrupt();
  });
  const auto t = Clock::now();
  EXPECT_TRUE(stop.sleep_for(std::chrono::seconds(60)));
  interrupter.join();
  EXPECT_LT(Clock::now() - t, std::chrono::seconds(10));
  EXPECT_TRUE(stop.interrupted());
  EXPECT_EQ(stop.requested(), -1);
}

}  // namespace
}  // namespace workload
