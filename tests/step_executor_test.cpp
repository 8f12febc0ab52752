// Tests for the executors' factory rules: which configurations an executor refuses before any
// rendezvous, and which need a stream of their own.
#include "lib/step_executor.h"

#include <gtest/gtest.h>

#include <string>

#include "lib/usage_error.h"

namespace workload {
namespace {

TrainConfig graph_config() {
  TrainConfig c;
  c.data = "/data";
  c.device = Device::kCuda;
  c.cuda_graph = true;
  c.warmup = kDdpGraphWarmup;
  return c;
}

// The UsageError's message, or "" when none was thrown.
std::string refusal(const TrainConfig& c, bool distributed) {
  try {
    check_step_executor(c, distributed);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(StepExecutorTest, ADataParallelGraphRunsOnNcclAfterElevenEagerSteps) {
  TrainConfig c = graph_config();
  EXPECT_EQ(refusal(c, true), "");
  EXPECT_EQ(refusal(c, false), "");
  c.dist_backend = DistBackend::kGloo;
  const std::string gloo = refusal(c, true);
  EXPECT_NE(gloo.find("--cuda-graph: a data-parallel graph needs --dist-backend nccl"),
            std::string::npos)
      << gloo;
  EXPECT_NE(gloo.find("got --dist-backend gloo"), std::string::npos) << gloo;
  EXPECT_EQ(refusal(c, false), "") << "one process has no collectives to capture";
}

TEST(StepExecutorTest, ADataParallelGraphNeedsElevenWarmupStepsToTrain) {
  TrainConfig c = graph_config();
  c.warmup = kDdpGraphWarmup - 1;
  const std::string what = refusal(c, true);
  EXPECT_EQ(what.rfind("--warmup 10: a data-parallel --cuda-graph run needs 11 or more", 0), 0u)
      << what;
  EXPECT_EQ(refusal(c, false), "") << "one process captures after a single warm-up step";
  c.mode = RunMode::kForward;  // no Reducer iterations to wait for
  EXPECT_EQ(refusal(c, true), "");
  c.mode = RunMode::kTrain;
  c.cuda_graph = false;  // eager DDP starts at once
  c.warmup = 0;
  EXPECT_EQ(refusal(c, true), "");
}

TEST(StepExecutorTest, OnlyAGraphNeedsAStreamOfItsOwn) {
  TrainConfig c = graph_config();
  EXPECT_TRUE(executor_wants_own_stream(c));
  c.cuda_graph = false;
  EXPECT_FALSE(executor_wants_own_stream(c));
}

}  // namespace
}  // namespace workload
