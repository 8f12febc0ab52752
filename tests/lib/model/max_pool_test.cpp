// Tests for the model's max pool (lib/model/max_pool.h): LibTorch's pool where this build's kernels
// do not take the tensor, and on a GPU the kernels' values and input gradients against LibTorch's
// bit for bit (ties, NaN, windows at the borders, channel counts with and without 16-byte vectors,
// fp32, fp16 and bf16), with and without grad.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "lib/model/max_pool.h"

namespace workload {
namespace {

using torch::nn::MaxPool2dOptions;

// Equal values, NaN where the other has NaN.
bool same(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const torch::Tensor both_nan = torch::isnan(a) & torch::isnan(b);
  return ((a == b) | both_nan).all().item<bool>();
}

struct Pooled {
  torch::Tensor y;
  torch::Tensor dx;
};

// y and x's gradient for dy, through `pool`.
template <typename Pool>
Pooled run(const torch::Tensor& x, const torch::Tensor& dy, Pool pool) {
  const torch::Tensor leaf = x.detach().clone().requires_grad_(true);
  const torch::Tensor y = pool(leaf);
  y.backward(dy);
  return {y.detach(), leaf.grad()};
}

TEST(MaxPoolTest, CpuTensorsPoolAsLibTorch) {
  torch::manual_seed(3);
  const auto o = MaxPool2dOptions(3).stride(2).padding(1);
  const torch::Tensor x = torch::randn({2, 8, 9, 10}).contiguous(torch::MemoryFormat::ChannelsLast);
  EXPECT_FALSE(max_pool_kernels_take(x, o));
  const torch::Tensor dy = torch::randn({2, 8, 5, 5});
  const Pooled ours = run(x, dy, [&](const torch::Tensor& t) { return max_pool2d(t, o); });
  const Pooled ref =
      run(x, dy, [&](const torch::Tensor& t) { return torch::nn::functional::max_pool2d(t, o); });
  EXPECT_TRUE(same(ours.y, ref.y));
  EXPECT_TRUE(same(ours.dx, ref.dx));
}

class MaxPoolGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if !defined(WORKLOAD_HAVE_MAX_POOL_KERNELS)
    GTEST_SKIP() << "this build has no max-pool kernels (no CUDA LibTorch or no nvcc)";
#endif
    if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  }
  static torch::Tensor last(const torch::Tensor& t) {
    return t.contiguous(torch::MemoryFormat::ChannelsLast);
  }
};

TEST_F(MaxPoolGpuTest, TheKernelsTakeWhatTheyCanPoolAndNothingElse) {
  const auto stem = MaxPool2dOptions(3).stride(2).padding(1);
  const torch::Tensor x = last(torch::randn({2, 8, 9, 9}, torch::kCUDA));
  EXPECT_TRUE(max_pool_kernels_take(x, stem));
  EXPECT_TRUE(max_pool_kernels_take(x.to(torch::kHalf), stem));
  EXPECT_TRUE(max_pool_kernels_take(x.to(torch::kBFloat16), stem));
  EXPECT_TRUE(max_pool_kernels_take(x, MaxPool2dOptions(15).stride(1).padding(7)));
  EXPECT_FALSE(max_pool_kernels_take(x.contiguous(), stem));  // NCHW
  EXPECT_FALSE(max_pool_kernels_take(x.to(torch::kDouble), stem));
  EXPECT_FALSE(max_pool_kernels_take(x.cpu(), stem));
  EXPECT_FALSE(max_pool_kernels_take(x, MaxPool2dOptions(3).stride(2).padding(1).dilation(2)));
  EXPECT_FALSE(max_pool_kernels_take(x, MaxPool2dOptions(3).stride(2).padding(1).ceil_mode(true)));
  EXPECT_FALSE(max_pool_kernels_take(x, MaxPool2dOptions({3, 2}).stride(2)));
  EXPECT_FALSE(max_pool_kernels_take(x, MaxPool2dOptions(3).stride({2, 1})));
  EXPECT_FALSE(max_pool_kernels_take(x, MaxPool2dOptions(16).stride(1).padding(8)));
  EXPECT_FALSE(max_pool_kernels_take(x, MaxPool2dOptions(11).stride(1)));  // no output
  // What the kernels do not take still pools, as LibTorch's.
  const torch::Tensor nchw = x.contiguous();
  EXPECT_TRUE(same(max_pool2d(nchw, stem), torch::nn::functional::max_pool2d(nchw, stem)));
}

TEST_F(MaxPoolGpuTest, ValuesAndGradientsAreLibTorchsBitForBit) {
  torch::manual_seed(7);
  struct Case {
    std::vector<std::int64_t> shape;
    int kernel, stride, pad;
  };
  const std::vector<Case> cases = {
      {{4, 64, 32, 33}, 3, 2, 1},  // the stem's pool, an odd width: 16-byte vectors
      {{2, 3, 17, 16}, 3, 2, 1},   // three channels: one value a thread
      {{2, 16, 9, 9}, 2, 2, 0},    // windows that do not overlap
      {{1, 8, 10, 10}, 5, 1, 2},   // every input in up to 25 windows
  };
  for (const auto dtype : {torch::kFloat, torch::kHalf, torch::kBFloat16}) {
    for (const Case& c : cases) {
      const auto o = MaxPool2dOptions(c.kernel).stride(c.stride).padding(c.pad);
      // Few distinct values, so windows tie and one input is the argmax of several windows; NaN
      // in about one value in a hundred.
      torch::Tensor x = torch::randint(-3, 4, c.shape, torch::kCUDA).to(torch::kFloat);
      x = torch::where(torch::rand(c.shape, torch::kCUDA) < 0.01, NAN, x);
      x = last(x.to(dtype));
      ASSERT_TRUE(max_pool_kernels_take(x, o));
      const torch::Tensor ref_y = torch::nn::functional::max_pool2d(x, o);
      const torch::Tensor dy = last(torch::randn(ref_y.sizes(), torch::kCUDA).to(dtype));
      const Pooled ours = run(x, dy, [&](const torch::Tensor& t) { return max_pool2d(t, o); });
      const Pooled ref = run(
          x, dy, [&](const torch::Tensor& t) { return torch::nn::functional::max_pool2d(t, o); });
      const std::string at = std::string(c10::toString(dtype)) + " kernel " +
                             std::to_string(c.kernel) + " channels " + std::to_string(c.shape[1]);
      EXPECT_TRUE(same(ours.y, ref.y)) << at;
      EXPECT_TRUE(same(ours.dx, ref.dx)) << at;
      EXPECT_TRUE(ours.y.is_contiguous(torch::MemoryFormat::ChannelsLast)) << at;
      EXPECT_TRUE(ours.dx.is_contiguous(torch::MemoryFormat::ChannelsLast)) << at;
      // Without grad: the values alone.
      torch::NoGradGuard no_grad;
      EXPECT_TRUE(same(max_pool2d(x, o), ref.y)) << at;
    }
  }
}

// A gradient that reaches the pool in another layout is taken as it comes.
TEST_F(MaxPoolGpuTest, AGradientInAnotherLayoutIsTheSame) {
  torch::manual_seed(9);
  const auto o = MaxPool2dOptions(3).stride(2).padding(1);
  const torch::Tensor x = last(torch::randn({2, 16, 12, 12}, torch::kCUDA).to(torch::kHalf));
  const torch::Tensor dy = torch::randn({2, 16, 6, 6}, torch::kCUDA).to(torch::kHalf);  // NCHW
  const Pooled ours = run(x, dy, [&](const torch::Tensor& t) { return max_pool2d(t, o); });
  const Pooled ref =
      run(x, dy, [&](const torch::Tensor& t) { return torch::nn::functional::max_pool2d(t, o); });
  EXPECT_TRUE(same(ours.dx, ref.dx));
}

}  // namespace
}  // namespace workload
