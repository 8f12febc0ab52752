// Tests for sample_augment: torchvision RandomResizedCrop/RandomHorizontalFlip bounds and law.
#include "data_pipeline/augment.h"

#include <gtest/gtest.h>

#include <cmath>

namespace data_pipeline {
namespace {

TEST(AugmentTest, CropsStayInsideImageAndWithinScaleAndRatio) {
  const int sizes[][2] = {{512, 384}, {384, 512}, {512, 512}, {4000, 3000}, {24, 16}, {341, 512}};
  for (const auto& wh : sizes) {
    const int w = wh[0], h = wh[1];
    for (std::uint64_t i = 0; i < 3000; ++i) {
      CounterRng rng(2026, 0, i, CounterRng::kAugment);
      const AugmentParams p = sample_augment(rng, w, h);
      ASSERT_GE(p.crop.x, 0);
      ASSERT_GE(p.crop.y, 0);
      ASSERT_GE(p.crop.width, 1);
      ASSERT_GE(p.crop.height, 1);
      ASSERT_LE(p.crop.x + p.crop.width, w);
      ASSERT_LE(p.crop.y + p.crop.height, h);
      const double area = double(p.crop.width) * p.crop.height / (double(w) * h);
      // Rounding of w and h to integers can move the area slightly outside [0.08, 1].
      const double slack = 2.0 * (p.crop.width + p.crop.height + 1) / (double(w) * h);
      ASSERT_GE(area, 0.08 - slack) << w << "x" << h;
      ASSERT_LE(area, 1.0 + 1e-12);
    }
  }
}

// Mean area fraction of an accepted RandomResizedCrop on a square image, by numerical integration
// of torchvision's law: s ~ U[0.08, 1], t = log(aspect) ~ U[log 3/4, log 4/3], an attempt fits
// when s * e^|t| <= 1, attempts repeat until one fits (10 failures in a row are negligible here).
double expected_mean_area_on_square() {
  const double a = std::log(4.0 / 3.0);
  double num = 0, den = 0;
  const int steps = 20000;
  for (int i = 0; i < steps; ++i) {
    const double t = -a + (i + 0.5) * (2 * a / steps);
    const double top = std::min(1.0, std::exp(-std::fabs(t)));
    num += (top * top - 0.08 * 0.08) / 2;
    den += top - 0.08;
  }
  return num / den;
}

TEST(AugmentTest, DistributionMatchesTorchvisionLaw) {
  // On a large square image the accepted area fraction follows the law integrated above and
  // log(aspect) is symmetric around 0 over [log 3/4, log 4/3].
  const int w = 2000, h = 2000, n = 40000;
  double area_sum = 0, log_ratio_sum = 0, flips = 0;
  double log_ratio_min = 1e9, log_ratio_max = -1e9;
  for (int i = 0; i < n; ++i) {
    CounterRng rng(1, 2, static_cast<std::uint64_t>(i), CounterRng::kAugment);
    const AugmentParams p = sample_augment(rng, w, h);
    area_sum += double(p.crop.width) * p.crop.height / (double(w) * h);
    const double lr = std::log(double(p.crop.width) / p.crop.height);
    log_ratio_sum += lr;
    log_ratio_min = std::min(log_ratio_min, lr);
    log_ratio_max = std::max(log_ratio_max, lr);
    flips += p.flip ? 1 : 0;
  }
  EXPECT_NEAR(area_sum / n, expected_mean_area_on_square(), 0.005);
  EXPECT_NEAR(log_ratio_sum / n, 0.0, 0.01);
  EXPECT_GE(log_ratio_min, std::log(3.0 / 4.0) - 0.01);
  EXPECT_LE(log_ratio_max, std::log(4.0 / 3.0) + 0.01);
  EXPECT_LT(log_ratio_min, std::log(3.0 / 4.0) + 0.02);  // the whole range is reached
  EXPECT_GT(log_ratio_max, std::log(4.0 / 3.0) - 0.02);
  EXPECT_NEAR(flips / n, 0.5, 0.01);
}

TEST(AugmentTest, CropPositionIsUniform) {
  // With the crop size fixed by scale=(0.25, 0.25), ratio=(1, 1) on 400x400, x and y are uniform
  // over [0, 200].
  AugmentOptions o;
  o.scale_min = o.scale_max = 0.25;
  o.ratio_min = o.ratio_max = 1.0;
  double sx = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    CounterRng rng(3, 0, static_cast<std::uint64_t>(i), CounterRng::kAugment);
    const AugmentParams p = sample_augment(rng, 400, 400, o);
    ASSERT_EQ(p.crop.width, 200);
    ASSERT_EQ(p.crop.height, 200);
    sx += p.crop.x;
  }
  EXPECT_NEAR(sx / n, 100.0, 1.5);
}

TEST(AugmentTest, FallsBackToClampedCentreCrop) {
  // A 1000x10 strip never fits a crop of aspect <= 4/3 with area >= 8%: torchvision's fallback
  // takes the centre with the ratio clamped to 4/3: h = 10, w = round(10 * 4/3) = 13.
  CounterRng rng(1, 0, 0, CounterRng::kAugment);
  const AugmentParams p = sample_augment(rng, 1000, 10);
  EXPECT_EQ(p.crop.height, 10);
  EXPECT_EQ(p.crop.width, 13);
  EXPECT_EQ(p.crop.x, (1000 - 13) / 2);
  EXPECT_EQ(p.crop.y, 0);
  CounterRng rng2(1, 0, 0, CounterRng::kAugment);
  const AugmentParams q = sample_augment(rng2, 10, 1000);  // tall: w = 10, h = round(10 / 0.75)
  EXPECT_EQ(q.crop.width, 10);
  EXPECT_EQ(q.crop.height, 13);
}

TEST(AugmentTest, CentreCropIsTorchvisionsEvaluationCropAndDrawsNothing) {
  AugmentOptions eval;
  eval.crop = CropMode::kCenter;
  CounterRng rng(4, 1, 2, CounterRng::kAugment), untouched(4, 1, 2, CounterRng::kAugment);
  // Landscape 512 x 340: Resize(256) + CenterCrop(224) keeps 340 * 224 / 256 = 297.5 source
  // pixels, rounded half to even: 298; offsets round((512 - 298) / 2), round((340 - 298) / 2).
  const AugmentParams p = sample_augment(rng, 512, 340, eval);
  EXPECT_EQ(p.crop, (CropRect{107, 21, 298, 298}));
  EXPECT_FALSE(p.flip);
  // Portrait, odd margins: 301 wide -> side round(263.375) = 263, x = round(19) = 19,
  // y = round((500 - 263) / 2) = round(118.5) = 118 (half to even).
  EXPECT_EQ(sample_augment(rng, 301, 500, eval).crop, (CropRect{19, 118, 263, 263}));
  // A square already at the crop's share, and a fraction of 1 (the whole shorter side).
  EXPECT_EQ(sample_augment(rng, 256, 256, eval).crop, (CropRect{16, 16, 224, 224}));
  eval.center_fraction = 1.0;
  EXPECT_EQ(sample_augment(rng, 400, 300, eval).crop, (CropRect{50, 0, 300, 300}));
  // A 1-pixel image still gets a 1-pixel crop.
  EXPECT_EQ(sample_augment(rng, 1, 1, eval).crop, (CropRect{0, 0, 1, 1}));
  // No draw was taken: the generator is where an untouched one is.
  EXPECT_EQ(rng.uniform(), untouched.uniform());
}

TEST(AugmentTest, SameKeySameParams) {
  CounterRng a(2026, 5, 99, CounterRng::kAugment), b(2026, 5, 99, CounterRng::kAugment);
  const AugmentParams p = sample_augment(a, 512, 400), q = sample_augment(b, 512, 400);
  EXPECT_EQ(p.crop, q.crop);
  EXPECT_EQ(p.flip, q.flip);
}

TEST(AugmentTest, FlipProbabilityIsHonoured) {
  AugmentOptions never, always;
  never.flip_probability = 0.0;
  always.flip_probability = 1.0;
  for (std::uint64_t i = 0; i < 100; ++i) {
    CounterRng a(1, 1, i, 1), b(1, 1, i, 1);
    EXPECT_FALSE(sample_augment(a, 300, 200, never).flip);
    EXPECT_TRUE(sample_augment(b, 300, 200, always).flip);
  }
}

}  // namespace
}  // namespace data_pipeline
