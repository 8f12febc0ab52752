// Tests for CounterRng: pure function of its key, uniform, unbiased bounded draws.
#include "data_pipeline/counter_rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

namespace data_pipeline {
namespace {

TEST(CounterRngTest, SameKeySameSequence) {
  CounterRng a(2026, 3, 17, CounterRng::kAugment);
  CounterRng b(2026, 3, 17, CounterRng::kAugment);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.next_u64(), b.next_u64());
}

TEST(CounterRngTest, EveryKeyPartMatters) {
  const std::uint64_t base = CounterRng(2026, 3, 17, CounterRng::kAugment).next_u64();
  EXPECT_NE(base, CounterRng(2027, 3, 17, CounterRng::kAugment).next_u64());
  EXPECT_NE(base, CounterRng(2026, 4, 17, CounterRng::kAugment).next_u64());
  EXPECT_NE(base, CounterRng(2026, 3, 18, CounterRng::kAugment).next_u64());
  EXPECT_NE(base, CounterRng(2026, 3, 17, CounterRng::kPermutation).next_u64());
  // Swapping epoch and index must not collide either.
  EXPECT_NE(CounterRng(1, 2, 3, 1).next_u64(), CounterRng(1, 3, 2, 1).next_u64());
}

TEST(CounterRngTest, UniformMomentsAndRange) {
  CounterRng rng(1, 0, 0, CounterRng::kAugment);
  const int n = 200000;
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum2 += u * u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_NEAR(sum2 / n - (sum / n) * (sum / n), 1.0 / 12.0, 0.002);
}

TEST(CounterRngTest, BelowIsUnbiasedOverSmallRange) {
  CounterRng rng(5, 1, 2, CounterRng::kAugment);
  const int k = 7, n = 70000;
  std::vector<int> counts(k, 0);
  for (int i = 0; i < n; ++i) {
    const auto v = rng.below(k);
    ASSERT_LT(v, static_cast<std::uint64_t>(k));
    ++counts[v];
  }
  double chi2 = 0;
  for (int c : counts) chi2 += (c - n / double(k)) * (c - n / double(k)) / (n / double(k));
  EXPECT_LT(chi2, 22.5);  // chi-square, 6 dof, p = 0.001
  EXPECT_EQ(CounterRng(1, 1, 1, 1).below(1), 0u);
}

TEST(CounterRngTest, DistinctIndicesGiveDistinctStreams) {
  std::set<std::uint64_t> firsts;
  for (std::uint64_t i = 0; i < 10000; ++i) firsts.insert(CounterRng(9, 0, i, 1).next_u64());
  EXPECT_EQ(firsts.size(), 10000u);
}

}  // namespace
}  // namespace data_pipeline
