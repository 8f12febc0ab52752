// Tests for the capture window: nothing recorded unless it was opened, the times and images/s of
// a closed one, one opening only, and a window dropped while open recording nothing.
#include "lib/run/capture_window.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace workload {
namespace {

TEST(CaptureWindowTest, AWindowNeverOpenedRecordsNothing) {
  RunResult result;
  {
    CaptureWindow window(result, /*cuda=*/false, "", 8);
    EXPECT_FALSE(window.is_open());
    window.close();
    EXPECT_FALSE(window.closed());
  }
  EXPECT_EQ(result.elapsed_s, 0);
  EXPECT_EQ(result.images_per_s, 0);
  EXPECT_FALSE(result.capture_started);
}

TEST(CaptureWindowTest, AClosedWindowRecordsItsTimeAndImagesPerSecond) {
  RunResult result;
  CaptureWindow window(result, /*cuda=*/false, "", 8);
  window.open();
  EXPECT_TRUE(window.is_open());
  EXPECT_FALSE(result.capture_started);  // a CPU run skips cudaProfilerStart
  result.steps.resize(5);                // the steps run inside it
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  window.close();
  EXPECT_FALSE(window.is_open());
  EXPECT_TRUE(window.closed());
  EXPECT_GE(result.elapsed_s, 0.019);
  EXPECT_GE(result.capture_drain_ms, 0);
  EXPECT_EQ(result.profiler_stop_ms, 0);  // the profiler never started
  EXPECT_DOUBLE_EQ(result.images_per_s, 5.0 * 8.0 / result.elapsed_s);
  EXPECT_TRUE(result.torch_trace.empty());

  // Once: a closed window neither opens again nor records again.
  const double elapsed = result.elapsed_s;
  window.open();
  EXPECT_FALSE(window.is_open());
  window.close();
  EXPECT_EQ(result.elapsed_s, elapsed);
}

TEST(CaptureWindowTest, AWindowDroppedWhileOpenRecordsNothing) {
  RunResult result;
  {
    CaptureWindow window(result, /*cuda=*/false, "", 8);
    window.open();
    result.steps.resize(3);
  }  // a failure inside the window: no drain, no figures
  EXPECT_EQ(result.elapsed_s, 0);
  EXPECT_EQ(result.images_per_s, 0);
}

}  // namespace
}  // namespace workload
