// Tests for LrSchedule: each kind's values at chosen steps against its formula, the warm-up's
// edges, the last step and beyond, invalid parameters naming their flag, and the rules that give a
// run its schedule (the scaled peak, the default warm-up and milestones).
#include "lib/model/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "lib/core/usage_error.h"

namespace workload {
namespace {

constexpr double kPi = 3.14159265358979323846;

LrScheduleOptions options(LrScheduleKind kind, double peak, std::int64_t warmup,
                          std::int64_t total) {
  LrScheduleOptions o;
  o.kind = kind;
  o.peak_lr = peak;
  o.warmup_steps = warmup;
  o.total_steps = total;
  return o;
}

void expect_invalid(const LrScheduleOptions& o, const std::string& message) {
  try {
    LrSchedule s(o);
    FAIL() << "expected std::invalid_argument: " << message;
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(LrScheduleTest, WarmUpRisesLinearlyToThePeakAtItsLastStep) {
  const LrSchedule s(options(LrScheduleKind::kCosine, 0.4, 4, 20));
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.4 * 1 / 4);  // a small start, not 0: the first step learns
  EXPECT_DOUBLE_EQ(s.lr_at(1), 0.4 * 2 / 4);
  EXPECT_DOUBLE_EQ(s.lr_at(2), 0.4 * 3 / 4);
  EXPECT_DOUBLE_EQ(s.lr_at(3), 0.4);  // the warm-up's last step reaches the peak
  EXPECT_DOUBLE_EQ(s.lr_at(4), 0.4);  // the cosine starts there
  EXPECT_FALSE(s.constant());
  // One warm-up step is none in effect: step 0 is at (0 + 1) / 1 of the peak.
  EXPECT_EQ(LrSchedule(options(LrScheduleKind::kConstant, 0.1, 1, 5)).lr_at(0), 0.1);
}

TEST(LrScheduleTest, CosineFallsFromThePeakTowardsItsFloor) {
  const double peak = 0.2;
  const std::int64_t w = 5, t = 105;
  const LrSchedule s(options(LrScheduleKind::kCosine, peak, w, t));
  for (const std::int64_t step : {5, 6, 30, 55, 80, 104}) {
    const double expected = peak * (1 + std::cos(kPi * double(step - w) / double(t - w))) / 2;
    EXPECT_NEAR(s.lr_at(step), expected, 1e-15) << step;
  }
  EXPECT_NEAR(s.lr_at(55), peak / 2, 1e-15);  // half way down, half the peak
  EXPECT_GT(s.lr_at(104), 0);                 // the last step is above the floor, which step T
  EXPECT_LT(s.lr_at(104), peak * 1e-3);       // would reach
  EXPECT_EQ(s.lr_at(105), s.lr_at(104));      // past the end: the last step's LR
  EXPECT_EQ(s.lr_at(1000000), s.lr_at(104));
  for (std::int64_t k = w + 1; k < t; ++k) EXPECT_LT(s.lr_at(k), s.lr_at(k - 1)) << k;

  LrScheduleOptions floored = options(LrScheduleKind::kCosine, peak, 0, 10);
  floored.final_fraction = 0.1;
  const LrSchedule f(floored);
  EXPECT_DOUBLE_EQ(f.lr_at(0), peak);
  const double floor = peak * 0.1;
  EXPECT_NEAR(f.lr_at(5), floor + (peak - floor) / 2, 1e-15);
  EXPECT_NEAR(f.lr_at(9), floor + (peak - floor) * (1 + std::cos(kPi * 0.9)) / 2, 1e-15);
}

TEST(LrScheduleTest, StepDecayDividesAtEachMilestone) {
  LrScheduleOptions o = options(LrScheduleKind::kStep, 0.1, 2, 12);
  o.milestones = {5, 8, 8};  // 8 twice: two decays there
  o.decay_factor = 0.5;
  const LrSchedule s(o);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.05);
  EXPECT_DOUBLE_EQ(s.lr_at(1), 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(4), 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(5), 0.05);
  EXPECT_DOUBLE_EQ(s.lr_at(7), 0.05);
  EXPECT_DOUBLE_EQ(s.lr_at(8), 0.0125);
  EXPECT_DOUBLE_EQ(s.lr_at(11), 0.0125);
  EXPECT_DOUBLE_EQ(s.lr_at(12), 0.0125);
}

TEST(LrScheduleTest, ConstantIsThePeakEveryStepUnlessWarmedUp) {
  const LrSchedule s(options(LrScheduleKind::kConstant, 0.1, 0, 11));
  EXPECT_TRUE(s.constant());
  for (std::int64_t k = 0; k < 20; ++k) EXPECT_EQ(s.lr_at(k), 0.1) << k;  // exactly: no arithmetic
  const LrSchedule warmed(options(LrScheduleKind::kConstant, 0.1, 3, 11));
  EXPECT_FALSE(warmed.constant());
  EXPECT_DOUBLE_EQ(warmed.lr_at(0), 0.1 / 3);
  EXPECT_EQ(warmed.lr_at(3), 0.1);
  EXPECT_THROW(s.lr_at(-1), std::out_of_range);
  // Cosine and step are never constant, whatever their values.
  EXPECT_FALSE(LrSchedule(options(LrScheduleKind::kStep, 0.1, 0, 11)).constant());
  EXPECT_FALSE(LrSchedule(options(LrScheduleKind::kCosine, 0.1, 0, 1)).constant());
}

TEST(LrScheduleTest, InvalidParametersNameTheirFlag) {
  expect_invalid(options(LrScheduleKind::kCosine, -0.1, 0, 10),
                 "--lr: expected a number >= 0, got -0.1");
  expect_invalid(options(LrScheduleKind::kCosine, NAN, 0, 10),
                 "--lr: expected a number >= 0, got nan");
  expect_invalid(
      options(LrScheduleKind::kCosine, 0.1, 0, 0),
      "--steps: a learning-rate schedule needs a run of at least 1 optimizer step, got 0");
  expect_invalid(options(LrScheduleKind::kCosine, 0.1, 12, 11),
                 "--lr-warmup-steps: expected an integer in [0, 11] (the run's optimizer steps), "
                 "got 12");
  expect_invalid(options(LrScheduleKind::kConstant, 0.1, -1, 11),
                 "--lr-warmup-steps: expected an integer in [0, 11] (the run's optimizer steps), "
                 "got -1");
  LrScheduleOptions o = options(LrScheduleKind::kCosine, 0.1, 0, 10);
  o.final_fraction = 1.5;
  expect_invalid(o,
                 "--lr-schedule cosine: expected a final fraction of the peak in [0, 1], got 1.5");
  o = options(LrScheduleKind::kStep, 0.1, 2, 10);
  o.decay_factor = 0;
  expect_invalid(o, "--lr-schedule step: expected a decay factor in (0, 1], got 0");
  o.decay_factor = 0.1;
  o.milestones = {1};  // inside the warm-up
  expect_invalid(o, "--lr-schedule step: expected milestones non-decreasing in [2, 10), got 1");
  o.milestones = {5, 4};
  expect_invalid(o, "--lr-schedule step: expected milestones non-decreasing in [2, 10), got 4");
  o.milestones = {10};
  expect_invalid(o, "--lr-schedule step: expected milestones non-decreasing in [2, 10), got 10");
  // Every step a warm-up step is a schedule too.
  EXPECT_DOUBLE_EQ(LrSchedule(options(LrScheduleKind::kCosine, 0.1, 10, 10)).lr_at(9), 0.1);
}

TEST(LrScheduleTest, TheRulesScaleThePeakAndChooseTheWarmUpAndMilestones) {
  EXPECT_DOUBLE_EQ(scaled_lr(256), 0.1);
  EXPECT_DOUBLE_EQ(scaled_lr(128), 0.05);
  EXPECT_DOUBLE_EQ(scaled_lr(1024), 0.4);
  EXPECT_EQ(scaled_lr(256), kReferenceLr);  // exactly: the article's LR at its reference batch
  EXPECT_EQ(default_lr_warmup_steps(LrScheduleKind::kConstant, 1000), 0);
  EXPECT_EQ(default_lr_warmup_steps(LrScheduleKind::kCosine, 1000), 250);  // 25%
  EXPECT_EQ(default_lr_warmup_steps(LrScheduleKind::kStep, 1000), 250);
  EXPECT_EQ(default_lr_warmup_steps(LrScheduleKind::kCosine, 3), 1);  // at least 1
  EXPECT_EQ(default_lr_warmup_steps(LrScheduleKind::kCosine, 1), 1);
  EXPECT_EQ(default_lr_warmup_steps(LrScheduleKind::kCosine, 30), 8);  // 7.5, rounded
  EXPECT_EQ(default_lr_warmup_steps(LrScheduleKind::kCosine, 11), 3);  // 2.75, rounded
  EXPECT_EQ(default_lr_milestones(10, 100), (std::vector<std::int64_t>{40, 70, 90}));
  EXPECT_EQ(default_lr_milestones(1, 11), (std::vector<std::int64_t>{4, 7, 9}));
  EXPECT_TRUE(default_lr_milestones(5, 5).empty());

  TrainConfig c;  // no --lr, --lr-warmup-steps: the rules; batch 128, 3 + 8 steps
  const LrPlan scaled = plan_lr(c, 1);
  EXPECT_TRUE(scaled.scaled);
  EXPECT_EQ(scaled.global_batch, 128);
  EXPECT_EQ(scaled.options.kind, LrScheduleKind::kCosine);
  EXPECT_DOUBLE_EQ(scaled.options.peak_lr, 0.05);
  EXPECT_EQ(scaled.options.warmup_steps, 3);  // 25% of 11
  EXPECT_EQ(scaled.options.total_steps, 11);
  EXPECT_EQ(scaled.options.final_fraction, 0);
  EXPECT_TRUE(scaled.options.milestones.empty());
  c.lr = 0.1;
  c.lr_schedule = LrScheduleKind::kConstant;
  const LrPlan article = plan_lr(c, 1);
  EXPECT_FALSE(article.scaled);
  EXPECT_EQ(article.options.peak_lr, 0.1);
  EXPECT_EQ(article.options.warmup_steps, 0);
  EXPECT_TRUE(LrSchedule(article.options).constant());
  c.lr_schedule = LrScheduleKind::kStep;
  c.lr_warmup_steps = 10;
  c.warmup = 0;
  c.steps = 100;
  const LrPlan step = plan_lr(c, 4);  // batch 128 x 4 ranks
  EXPECT_EQ(step.global_batch, 512);
  EXPECT_EQ(step.options.warmup_steps, 10);
  EXPECT_EQ(step.options.milestones, (std::vector<std::int64_t>{40, 70, 90}));
  EXPECT_EQ(step.options.decay_factor, kStepDecayFactor);
  c.lr_warmup_steps = 101;
  EXPECT_THROW(plan_lr(c, 4), UsageError);
}

}  // namespace
}  // namespace workload
