// Tests for the captured steps' aggregates: percentiles as numpy computes them, the longest wait,
// the totals and the skipped images.
#include "lib/report/step_summary.h"

#include <gtest/gtest.h>

namespace workload {
namespace {

TEST(StepSummaryTest, PercentileInterpolatesLikeNumpy) {
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0.0);
  EXPECT_DOUBLE_EQ(percentile({5}, 95), 5.0);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 95), 9.55);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3}, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3}, 100), 3.0);
}

TEST(StepSummaryTest, SummaryFindsTheLongestWaitAndTotals) {
  RunResult run;
  std::vector<StepRecord>& steps = run.steps;
  steps.resize(4);
  const double waits[] = {1.0, 7.5, 2.0, 7.5};
  for (int i = 0; i < 4; ++i) {
    steps[i].index = i;
    steps[i].batch_wait_ms = waits[i];
    steps[i].h2d_submit_ms = 0.25;
    steps[i].step_ms = 10.0 * (i + 1);
  }
  steps[2].skipped.push_back({"a.jpg", "bad", 0, 1, "b.jpg"});
  run.warmup_steps.resize(2);
  run.warmup_steps[1].warmup = true;
  run.warmup_steps[1].skipped.push_back({"c.jpg", "bad", 0, 2, "d.jpg"});
  run.warmup_steps[1].skipped.push_back({"e.jpg", "bad", 0, 3, "f.jpg"});
  const StepSummary s = summarize(run);
  EXPECT_DOUBLE_EQ(s.batch_wait_total_ms, 18.0);
  EXPECT_DOUBLE_EQ(s.batch_wait_max_ms, 7.5);
  EXPECT_EQ(s.batch_wait_max_step, 1);  // the first of equal maxima
  EXPECT_DOUBLE_EQ(s.h2d_submit_total_ms, 1.0);
  EXPECT_DOUBLE_EQ(s.step_ms_p50, 25.0);
  EXPECT_EQ(s.images_skipped, 1);            // captured steps only
  EXPECT_EQ(s.images_skipped_all_steps, 3);  // and the warm-up's
}

TEST(StepSummaryTest, EachPhasesMedianOverTheStepsThatOpenedIt) {
  RunResult run;
  run.steps.resize(3);
  run.steps[0].phase_ms = {{"batch_wait", 1.0}, {"forward", 10.0}};
  run.steps[1].phase_ms = {{"batch_wait", 3.0}, {"forward", 30.0}, {"loss_item", 5.0}};
  run.steps[2].phase_ms = {{"batch_wait", 2.0}, {"forward", 20.0}};
  run.warmup_steps.resize(1);
  run.warmup_steps[0].phase_ms = {{"forward", 1000.0}};  // warm-up steps are not counted
  const StepSummary s = summarize(run);
  EXPECT_EQ(s.phase_ms_p50, (std::vector<std::pair<std::string, double>>{
                                {"batch_wait", 2.0}, {"forward", 20.0}, {"loss_item", 5.0}}));
}

}  // namespace
}  // namespace workload
