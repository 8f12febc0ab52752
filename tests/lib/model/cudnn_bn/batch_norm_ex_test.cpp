// Tests for cuDNN's fused batch norm on tensors (lib/model/cudnn_bn/batch_norm_ex.h): each BnOps
// against its definition computed in double, PyTorch's running-statistics rule, and the inputs it
// refuses.
#include "lib/model/cudnn_bn/batch_norm_ex.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <string>

namespace workload::cudnn_bn {
namespace {

class BatchNormExTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  }
  at::TensorOptions gpu() const { return at::TensorOptions().device(at::kCUDA, 0); }
  at::Tensor nhwc(at::IntArrayRef size, double scale = 1.0) const {
    return (at::randn(size, gpu()) * scale).contiguous(at::MemoryFormat::ChannelsLast);
  }
};

double max_err(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

TEST_F(BatchNormExTest, EachOpIsItsDefinition) {
  at::manual_seed(5);
  const at::Tensor x = nhwc({8, 32, 6, 6}, 2.0), z = nhwc({8, 32, 6, 6});
  const at::Tensor w = at::rand({32}, gpu()) + 0.5, b = at::rand({32}, gpu()) - 0.5;
  const double momentum = 0.1, eps = 1e-5;
  const at::Tensor xd = x.to(at::kDouble);
  const at::Tensor mean = xd.mean({0, 2, 3});
  const at::Tensor var = xd.var({0, 2, 3}, /*unbiased=*/false);
  const at::Tensor norm = (xd - mean.view({1, -1, 1, 1})) / (var.view({1, -1, 1, 1}) + eps).sqrt() *
                              w.to(at::kDouble).view({1, -1, 1, 1}) +
                          b.to(at::kDouble).view({1, -1, 1, 1});
  for (BnOps ops : {BnOps::kBn, BnOps::kBnRelu, BnOps::kBnAddRelu}) {
    at::Tensor rm = at::zeros({32}, gpu()), rv = at::ones({32}, gpu());
    const BnForward f = batch_norm_forward(x, ops == BnOps::kBnAddRelu ? z : at::Tensor(), w, b, rm,
                                           rv, momentum, eps, ops);
    const at::Tensor expected = ops == BnOps::kBn       ? norm
                                : ops == BnOps::kBnRelu ? norm.relu()
                                                        : (norm + z.to(at::kDouble)).relu();
    EXPECT_LT(max_err(f.y, expected), 1e-4) << static_cast<int>(ops);
    EXPECT_TRUE(f.y.is_contiguous(at::MemoryFormat::ChannelsLast));
    EXPECT_LT(max_err(f.save_mean, mean), 1e-5);
    EXPECT_LT(max_err(f.save_inv_var, (var + eps).rsqrt()), 1e-4);
    // PyTorch's rule: r = (1 - m) r + m s, with the unbiased variance.
    EXPECT_LT(max_err(rm, mean * momentum), 1e-5);
    EXPECT_LT(max_err(rv, 1 - momentum + momentum * xd.var({0, 2, 3}, /*unbiased=*/true)), 1e-4);

    // Backward against autograd through the double-precision definition.
    const at::Tensor dy = nhwc({8, 32, 6, 6});
    const BnBackward g = batch_norm_backward(x, dy, w, b, f, eps, ops);
    at::Tensor xr = xd.clone().requires_grad_(true), zr = z.to(at::kDouble).requires_grad_(true);
    at::Tensor wr = w.to(at::kDouble).requires_grad_(true),
               br = b.to(at::kDouble).requires_grad_(true);
    at::Tensor yr = at::batch_norm(xr, wr, br, {}, {}, true, 0.0, eps, false);
    if (ops == BnOps::kBnAddRelu) yr = yr + zr;
    if (ops != BnOps::kBn) yr = yr.relu();
    (yr * dy.to(at::kDouble)).sum().backward();
    EXPECT_LT(max_err(g.dx, xr.grad()), 1e-3) << static_cast<int>(ops);
    EXPECT_LT(max_err(g.dweight, wr.grad()), 1e-3);
    EXPECT_LT(max_err(g.dbias, br.grad()), 1e-3);
    if (ops == BnOps::kBnAddRelu) {
      EXPECT_LT(max_err(g.dz, zr.grad()), 1e-5);
    } else {
      EXPECT_FALSE(g.dz.defined());
    }
  }
}

TEST_F(BatchNormExTest, RefusesWhatItCannotTakeNamingIt) {
  const at::Tensor x = nhwc({4, 6, 5, 5});
  const at::Tensor w = at::ones({6}, gpu()), b = at::zeros({6}, gpu());
  const at::Tensor rm = at::zeros({6}, gpu()), rv = at::ones({6}, gpu());
  const auto message = [&](auto&& call) -> std::string {
    try {
      call();
    } catch (const c10::Error& e) {
      return e.what_without_backtrace();
    }
    return "(no error)";
  };
  EXPECT_NE(message([&] {
              batch_norm_forward(x.contiguous(), {}, w, b, rm, rv, 0.1, 1e-5, BnOps::kBn);
            }).find("channels_last"),
            std::string::npos);
  EXPECT_NE(message([&] {
              batch_norm_forward(x, x, w, b, rm, rv, 0.1, 1e-5, BnOps::kBnAddRelu);
            }).find("multiple of 4"),
            std::string::npos);
  EXPECT_NE(message([&] {
              batch_norm_forward(x, {}, w.to(at::kHalf), b, rm, rv, 0.1, 1e-5, BnOps::kBn);
            }).find("weight"),
            std::string::npos);
  EXPECT_NE(message([&] {
              batch_norm_forward(x.to(at::kDouble), {}, w, b, rm, rv, 0.1, 1e-5, BnOps::kBn);
            }).find("float, half or bfloat16"),
            std::string::npos);
  EXPECT_NE(message([&] {
              batch_norm_forward(x.cpu(), {}, w, b, rm, rv, 0.1, 1e-5, BnOps::kBn);
            }).find("CUDA"),
            std::string::npos);
}

}  // namespace
}  // namespace workload::cudnn_bn
