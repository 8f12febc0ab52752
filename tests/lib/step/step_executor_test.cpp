// Tests for the executors' factory rules (which configurations an executor refuses before any
// rendezvous, and which need a stream of their own) and for the one loop that runs a plan's phases.
#include "lib/step/step_executor.h"

#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/core/usage_error.h"
#include "lib/distributed/data_parallel.h"

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

// Records which phase runs, and which phase the tracker names while it runs.
class RecordingExecutor final : public StepExecutor {
 public:
  explicit RecordingExecutor(PhaseTracker* tracker) : tracker_(tracker) {}
  const StepPlan& plan() const override { return plan_; }
  void run(StepPhase phase, StepInputs&) override {
    ran.push_back(std::string(range_name(phase)) + "/" + tracker_->current);
    if (phase == fail_in) throw std::runtime_error("failed");
  }
  torch::Tensor loss() const override { return {}; }
  std::vector<std::string> ran;
  std::optional<StepPhase> fail_in;

 private:
  StepPlan plan_;
  PhaseTracker* tracker_;
};

TEST(StepExecutorTest, PhasesRunInOrderEachInsideItsRange) {
  PhaseTracker tracker;
  std::vector<std::string> entered;
  tracker.on_enter = [&](const char* name) { entered.push_back(name); };
  RecordingExecutor executor(&tracker);
  StepInputs inputs;
  run_phases(
      executor,
      {StepPhase::kForward, StepPhase::kZeroGrad, StepPhase::kBackward, StepPhase::kOptimizerStep},
      inputs, &tracker);
  EXPECT_EQ(executor.ran,
            (std::vector<std::string>{"forward/forward", "zero_grad/zero_grad", "backward/backward",
                                      "optimizer_step/optimizer_step"}));
  EXPECT_EQ(entered,
            (std::vector<std::string>{"forward", "zero_grad", "backward", "optimizer_step"}));
  EXPECT_STREQ(tracker.current, "");  // every phase closed
  // A failure leaves the tracker naming the phase it happened in, for the error's message.
  executor.fail_in = StepPhase::kBackward;
  EXPECT_THROW(run_phases(executor, {StepPhase::kForward, StepPhase::kBackward}, inputs, &tracker),
               std::runtime_error);
  EXPECT_STREQ(tracker.current, "backward");
}

}  // namespace
}  // namespace workload
