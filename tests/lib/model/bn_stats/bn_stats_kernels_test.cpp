// Tests for the batch norm's one-kernel arithmetic (lib/model/bn_stats/bn_stats_kernels.h) on its
// own: the ordered channel sums of --deterministic and the backward's sums of one BN or two, at
// every kind of shape (a row narrower than a load, wider than a block, a block's rows not
// divisible by its threads), with 16-byte loads and with the half2 loads of a row that is not
// 16-byte aligned, and the same bits in every run. The statistics and the gradient coefficients
// are held to the reference in cudnn_conv_bn_ops_test, where the fused pieces use them. Each case
// skips without a GPU.
#include "lib/model/bn_stats/bn_stats_kernels.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace workload {
namespace {

class ChannelSumsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  }
  static at::TensorOptions gpu(at::ScalarType t) {
    return at::TensorOptions().device(at::kCUDA, 0).dtype(t);
  }
  // fp16 values with a mean and a spread per channel, as a convolution's output has.
  static at::Tensor rows_of(std::int64_t rows, std::int64_t channels) {
    const at::Tensor mean = at::randn({1, channels}, gpu(at::kFloat));
    return (at::randn({rows, channels}, gpu(at::kFloat)) * 2 + mean).to(at::kHalf);
  }
};

// The sums of y ([rows, channels], rows contiguous; a view at any offset), through the kernel.
std::pair<at::Tensor, at::Tensor> channel_sums(const at::Tensor& y) {
  const std::int64_t rows = y.size(0), channels = y.size(1);
  const auto f = at::TensorOptions().device(y.device()).dtype(at::kFloat);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  at::Tensor sum = at::full({channels}, nan, f), sqsum = at::full({channels}, nan, f);
  at::Tensor partial = at::full({channel_sums_workspace(rows, channels)}, nan, f);
  launch_channel_sums(ChannelSumsArgs{y.data_ptr(), rows, channels, sum.data_ptr<float>(),
                                      sqsum.data_ptr<float>(), partial.data_ptr<float>()},
                      c10::cuda::getCurrentCUDAStream());
  return {sum, sqsum};
}

// The worst error of the sums against y's in double: the sum's against the sum of |y| (what its
// rounding scales with), the sum of squares' against itself.
std::pair<double, double> worst_errors(const at::Tensor& y, const at::Tensor& sum,
                                       const at::Tensor& sqsum) {
  const at::Tensor yd = y.to(at::kDouble);
  const at::Tensor scale = yd.abs().sum(0).clamp_min(1e-30), sq_want = (yd * yd).sum(0);
  const double s = ((sum.to(at::kDouble) - yd.sum(0)).abs() / scale).max().item<double>();
  const double q =
      ((sqsum.to(at::kDouble) - sq_want).abs() / sq_want.clamp_min(1e-30)).max().item<double>();
  return {s, q};
}

TEST_F(ChannelSumsTest, AreTheSumsInDoubleAtEveryShape) {
  at::manual_seed(3);
  // 2 and 6 channels: half2 loads only; 24 and 200: 16-byte loads, fewer than a warp's lanes and a
  // block's threads not a multiple of them; 4096: each thread two chunks of a row.
  for (const std::int64_t channels : {2, 6, 24, 64, 200, 256, 2048, 4096}) {
    for (const std::int64_t rows : {1, 63, 65, 1000, 70001}) {
      if (rows * channels > 100'000'000) continue;
      const at::Tensor y = rows_of(rows, channels);
      const auto [sum, sqsum] = channel_sums(y);
      const auto [s, q] = worst_errors(y, sum, sqsum);
      const std::string what = std::to_string(rows) + " x " + std::to_string(channels);
      EXPECT_LT(s, 5e-6) << what;
      EXPECT_LT(q, 5e-6) << what;
    }
  }
}

TEST_F(ChannelSumsTest, NoRowsAreZeroSums) {
  const auto [sum, sqsum] = channel_sums(at::empty({0, 64}, gpu(at::kHalf)));
  EXPECT_TRUE(at::equal(sum, at::zeros({64}, gpu(at::kFloat))));
  EXPECT_TRUE(at::equal(sqsum, at::zeros({64}, gpu(at::kFloat))));
}

// The rows of a view two halves into its storage are 4-byte aligned only: the half2 loads, whose
// sums differ from the 16-byte loads' in their order only.
TEST_F(ChannelSumsTest, ARowNotSixteenByteAlignedTakesTheNarrowLoads) {
  at::manual_seed(4);
  const std::int64_t rows = 50'000, channels = 64;
  const at::Tensor aligned = rows_of(rows, channels);
  at::Tensor storage = at::empty({rows * channels + 2}, gpu(at::kHalf));
  const at::Tensor shifted = storage.narrow(0, 2, rows * channels).view({rows, channels});
  shifted.copy_(aligned);
  ASSERT_NE(reinterpret_cast<std::uintptr_t>(shifted.data_ptr()) % 16, 0u);
  const auto [sum, sqsum] = channel_sums(shifted);
  const auto [s, q] = worst_errors(shifted, sum, sqsum);
  EXPECT_LT(s, 5e-6);
  EXPECT_LT(q, 5e-6);
  const auto [sum16, sqsum16] = channel_sums(aligned);
  EXPECT_TRUE(at::allclose(sum, sum16, 1e-5, 1e-3));
  EXPECT_TRUE(at::allclose(sqsum, sqsum16, 1e-5, 1e-3));
}

TEST_F(ChannelSumsTest, GiveTheSameBitsEachRun) {
  at::manual_seed(5);
  for (const auto& [rows, channels] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {125'440, 64}, {31'360, 256}, {6'272, 1024}, {17, 2048}}) {
    const at::Tensor y = rows_of(rows, channels);
    const auto [sum, sqsum] = channel_sums(y);
    for (int run = 1; run < 4; ++run) {
      const auto [again, sq_again] = channel_sums(y);
      EXPECT_TRUE(at::equal(again, sum)) << rows << " x " << channels << ", run " << run;
      EXPECT_TRUE(at::equal(sq_again, sqsum)) << rows << " x " << channels << ", run " << run;
    }
  }
}

// The backward's sums of x's BN: dbias = sum(dz), dweight = invstd * sum(dz * (x - mean)).
struct BnSums {
  at::Tensor dweight, dbias;
};

// One BN's backward sums through the kernel, or two sharing dz where x holds two. dz and each x
// are [rows, channels] (views at any offset); mean and invstd fp32 vectors.
std::vector<BnSums> backward_sums(const at::Tensor& dz, const std::vector<at::Tensor>& x,
                                  const std::vector<at::Tensor>& mean,
                                  const std::vector<at::Tensor>& invstd) {
  const std::int64_t rows = dz.size(0), channels = dz.size(1);
  const auto f = at::TensorOptions().device(dz.device()).dtype(at::kFloat);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const at::Tensor partial = at::full({bn_backward_sums_workspace(rows, channels)}, nan, f);
  BnBackwardSumsArgs a{
      dz.data_ptr(), rows, channels, static_cast<int>(x.size()), {}, partial.data_ptr<float>()};
  std::vector<BnSums> out;
  for (std::size_t i = 0; i < x.size(); ++i) {
    out.push_back({at::full({channels}, nan, f), at::full({channels}, nan, f)});
    a.bn[i] = {x[i].data_ptr(), mean[i].data_ptr<float>(), invstd[i].data_ptr<float>(),
               out[i].dweight.data_ptr<float>(), out[i].dbias.data_ptr<float>()};
  }
  launch_bn_backward_sums(a, c10::cuda::getCurrentCUDAStream());
  return out;
}

class BnBackwardSumsTest : public ChannelSumsTest {
 protected:
  // A BN's input, its batch mean (not exactly x's: the kernel takes any) and an invstd.
  struct Bn {
    at::Tensor x, mean, invstd;
  };
  static Bn bn_of(std::int64_t rows, std::int64_t channels) {
    const at::Tensor x = rows_of(rows, channels);
    return {x, x.to(at::kFloat).mean(0) + 0.01, at::rand({channels}, gpu(at::kFloat)) + 0.5};
  }
  // The worst errors of dweight's and dbias's against dz's and bn.x's in double, each against the
  // sum of its terms' magnitudes (what its rounding scales with).
  static std::pair<double, double> worst_errors(const at::Tensor& dz, const Bn& bn,
                                                const BnSums& got) {
    const at::Tensor d = dz.to(at::kDouble);
    const at::Tensor xmu = bn.x.to(at::kDouble) - bn.mean.to(at::kDouble);
    const at::Tensor inv = bn.invstd.to(at::kDouble);
    const at::Tensor dw_want = (d * xmu).sum(0) * inv, db_want = d.sum(0);
    const at::Tensor dw_scale = ((d * xmu).abs().sum(0) * inv).clamp_min(1e-30);
    const at::Tensor db_scale = d.abs().sum(0).clamp_min(1e-30);
    return {((got.dweight.to(at::kDouble) - dw_want).abs() / dw_scale).max().item<double>(),
            ((got.dbias.to(at::kDouble) - db_want).abs() / db_scale).max().item<double>()};
  }
};

TEST_F(BnBackwardSumsTest, AreTheSumsInDoubleAtEveryShape) {
  at::manual_seed(6);
  for (const std::int64_t channels : {2, 6, 24, 64, 200, 256, 2048}) {
    for (const std::int64_t rows : {1, 63, 65, 1000, 70001}) {
      if (rows * channels > 50'000'000) continue;
      const at::Tensor dz = at::randn({rows, channels}, gpu(at::kFloat)).to(at::kHalf);
      const Bn bn = bn_of(rows, channels);
      const BnSums got = backward_sums(dz, {bn.x}, {bn.mean}, {bn.invstd})[0];
      const auto [w, b] = worst_errors(dz, bn, got);
      const std::string what = std::to_string(rows) + " x " + std::to_string(channels);
      EXPECT_LT(w, 5e-6) << what;
      EXPECT_LT(b, 5e-6) << what;
    }
  }
}

// Two BNs sharing dz (a block's last BN and its shortcut's): each one's sums, bit for bit what
// it gets alone, in both load widths.
TEST_F(BnBackwardSumsTest, TwoBnsSharingDzAreEachAlone) {
  at::manual_seed(7);
  for (const auto& [rows, channels] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {12'544, 256}, {3'136, 1024}, {5'000, 6}}) {
    const at::Tensor dz = at::randn({rows, channels}, gpu(at::kFloat)).to(at::kHalf);
    const Bn b1 = bn_of(rows, channels), b2 = bn_of(rows, channels);
    const std::vector<BnSums> pair =
        backward_sums(dz, {b1.x, b2.x}, {b1.mean, b2.mean}, {b1.invstd, b2.invstd});
    const BnSums one = backward_sums(dz, {b1.x}, {b1.mean}, {b1.invstd})[0];
    const BnSums two = backward_sums(dz, {b2.x}, {b2.mean}, {b2.invstd})[0];
    const std::string what = std::to_string(rows) + " x " + std::to_string(channels);
    EXPECT_TRUE(at::equal(pair[0].dweight, one.dweight)) << what;
    EXPECT_TRUE(at::equal(pair[0].dbias, one.dbias)) << what;
    EXPECT_TRUE(at::equal(pair[1].dweight, two.dweight)) << what;
    EXPECT_TRUE(at::equal(pair[1].dbias, one.dbias)) << what;
    const auto [w, b] = worst_errors(dz, b2, pair[1]);
    EXPECT_LT(w, 5e-6) << what;
    EXPECT_LT(b, 5e-6) << what;
  }
}

// dz two halves into its storage is 4-byte aligned only: the half2 loads, whose sums differ from
// the 16-byte loads' in their order only.
TEST_F(BnBackwardSumsTest, AnInputNotSixteenByteAlignedTakesTheNarrowLoads) {
  at::manual_seed(8);
  const std::int64_t rows = 50'000, channels = 64;
  const at::Tensor dz = at::randn({rows, channels}, gpu(at::kFloat)).to(at::kHalf);
  at::Tensor storage = at::empty({rows * channels + 2}, gpu(at::kHalf));
  const at::Tensor shifted = storage.narrow(0, 2, rows * channels).view({rows, channels});
  shifted.copy_(dz);
  ASSERT_NE(reinterpret_cast<std::uintptr_t>(shifted.data_ptr()) % 16, 0u);
  const Bn bn = bn_of(rows, channels);
  const BnSums narrow = backward_sums(shifted, {bn.x}, {bn.mean}, {bn.invstd})[0];
  const auto [w, b] = worst_errors(dz, bn, narrow);
  EXPECT_LT(w, 5e-6);
  EXPECT_LT(b, 5e-6);
  const BnSums wide = backward_sums(dz, {bn.x}, {bn.mean}, {bn.invstd})[0];
  EXPECT_FALSE(at::equal(narrow.dweight, wide.dweight) && at::equal(narrow.dbias, wide.dbias))
      << "the same bits: the narrow loads were not taken";
  EXPECT_TRUE(at::allclose(narrow.dweight, wide.dweight, 1e-4, 1e-2));
}

TEST_F(BnBackwardSumsTest, GiveTheSameBitsEachRunAndZerosForNoRows) {
  at::manual_seed(9);
  for (const auto& [rows, channels] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {125'440, 64}, {6'272, 1024}, {17, 2048}, {0, 64}}) {
    const at::Tensor dz = at::randn({rows, channels}, gpu(at::kFloat)).to(at::kHalf);
    const Bn b1 = bn_of(rows, channels), b2 = bn_of(rows, channels);
    const auto run = [&] {
      return backward_sums(dz, {b1.x, b2.x}, {b1.mean, b2.mean}, {b1.invstd, b2.invstd});
    };
    const std::vector<BnSums> first = run();
    if (rows == 0) {
      for (const BnSums& s : first) {
        EXPECT_TRUE(at::equal(s.dweight, at::zeros({channels}, gpu(at::kFloat))));
        EXPECT_TRUE(at::equal(s.dbias, at::zeros({channels}, gpu(at::kFloat))));
      }
    }
    for (int r = 1; r < 4; ++r) {
      const std::vector<BnSums> again = run();
      for (std::size_t i = 0; i < 2; ++i) {
        EXPECT_TRUE(at::equal(again[i].dweight, first[i].dweight)) << rows << " x " << channels;
        EXPECT_TRUE(at::equal(again[i].dbias, first[i].dbias)) << rows << " x " << channels;
      }
    }
  }
}

}  // namespace
}  // namespace workload
