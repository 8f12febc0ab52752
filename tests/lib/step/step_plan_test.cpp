// Tests for the step's plan: the phases each step mode opens, in order, and the range names
// --inject-stall may use, derived from them.
#include "lib/step/step_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace workload {
namespace {

using V = std::vector<std::string>;
using P = std::vector<StepPhase>;

TrainConfig cpu_config() {
  TrainConfig c;
  c.data = "/data";
  c.device = Device::kCpu;
  return c;
}

TEST(StepPlanTest, TheEagerStepNormalizesUint8BatchesThenTrains) {
  TrainConfig c = cpu_config();
  StepPlan p = eager_plan(c);
  EXPECT_TRUE(p.load.empty());
  EXPECT_EQ(p.device, (P{StepPhase::kForward, StepPhase::kZeroGrad, StepPhase::kBackward,
                         StepPhase::kOptimizerStep}));
  c.loader.transform.dtype = data_pipeline::HostDType::kUInt8;
  c.mode = RunMode::kForward;
  p = eager_plan(c);
  EXPECT_EQ(p.load, (P{StepPhase::kNormalize}));
  EXPECT_EQ(p.device, (P{StepPhase::kForward}));
}

TEST(StepPlanTest, AGraphReplaysEveryDevicePhase) {
  TrainConfig c = cpu_config();
  c.loader.transform.dtype = data_pipeline::HostDType::kUInt8;  // normalize is in the graph too
  const StepPlan p = graph_plan(c);
  EXPECT_TRUE(p.load.empty());
  EXPECT_EQ(p.device, (P{StepPhase::kGraphReplay}));
  EXPECT_EQ(captured_plan(c).device, eager_plan(c).device);
  c.cuda_graph = true;
  EXPECT_EQ(captured_plan(c).device, p.device);
}

TEST(StepPlanTest, StepRangesFollowTheConfiguration) {
  TrainConfig c = cpu_config();
  EXPECT_EQ(step_ranges(c), (V{"data_load", "batch_wait", "h2d_submit", "forward", "zero_grad",
                               "backward", "optimizer_step"}));
  c.loader.transform.dtype = data_pipeline::HostDType::kUInt8;
  c.mode = RunMode::kForward;
  c.sync_every_step = true;
  EXPECT_EQ(step_ranges(c),
            (V{"data_load", "batch_wait", "h2d_submit", "normalize", "forward", "loss_item"}));
  c.cuda_graph = true;  // normalize and forward are in the graph
  EXPECT_EQ(step_ranges(c),
            (V{"data_load", "batch_wait", "h2d_submit", "graph_replay", "loss_item"}));
}

TEST(StepPlanTest, EveryPhaseHasTheRangeNameOfTheVocabulary) {
  EXPECT_STREQ(range_name(StepPhase::kNormalize), "normalize");
  EXPECT_STREQ(range_name(StepPhase::kForward), "forward");
  EXPECT_STREQ(range_name(StepPhase::kZeroGrad), "zero_grad");
  EXPECT_STREQ(range_name(StepPhase::kBackward), "backward");
  EXPECT_STREQ(range_name(StepPhase::kOptimizerStep), "optimizer_step");
  EXPECT_STREQ(range_name(StepPhase::kGraphReplay), "graph_replay");
}

}  // namespace
}  // namespace workload
