// Tests for the reference implementation of a fused bottleneck's pieces (lib/model/conv_bn_ops.h):
// each piece against what LibTorch's modules and autograd compute from the same values, on the CPU
// in fp32.
#include "lib/model/conv_bn_ops.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace workload {
namespace {

constexpr double kTol = 1e-5;

double rel(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).norm().item<double>() /
         std::max(b.to(torch::kDouble).norm().item<double>(), 1e-30);
}

torch::Tensor nhwc(const torch::Tensor& t) {
  return t.contiguous(torch::MemoryFormat::ChannelsLast);
}

const ConvBnOps& ops() { return reference_conv_bn_ops(); }

TEST(ConvBnOpsTest, ConvStatsIsTheConvolutionOfThePrologueAndItsSums) {
  torch::manual_seed(1);
  const torch::Tensor x = nhwc(torch::randn({2, 6, 7, 7}));
  const torch::Tensor w = nhwc(torch::randn({5, 6, 3, 3}));
  const torch::Tensor scale = torch::rand({6}) + 0.5, bias = torch::randn({6});
  const ConvStats c = ops().conv_stats(x, w, {1, 2}, Prologue{scale, bias});
  const torch::Tensor in = torch::relu(x * scale.view({1, -1, 1, 1}) + bias.view({1, -1, 1, 1}));
  const torch::Tensor ref = torch::conv2d(in, w, {}, 2, 1);
  EXPECT_EQ(c.y.sizes(), ref.sizes());
  EXPECT_LT(rel(c.y, ref), kTol);
  EXPECT_LT(rel(c.sum, ref.sum({0, 2, 3})), kTol);
  EXPECT_LT(rel(c.sqsum, (ref * ref).sum({0, 2, 3})), kTol);
  EXPECT_TRUE(c.y.is_contiguous(torch::MemoryFormat::ChannelsLast));
  const ConvStats plain = ops().conv_stats(x, w, {1, 1}, std::nullopt);
  EXPECT_LT(rel(plain.y, torch::conv2d(x, w, {}, 1, 1)), kTol);
}

// The statistics and the running ones as BatchNorm2d's training forward makes them.
TEST(ConvBnOpsTest, FinalizeIsBatchNormsTrainingForward) {
  torch::manual_seed(2);
  const torch::Tensor y = torch::randn({4, 3, 5, 5}) * 2 + 1;
  torch::nn::BatchNorm2d bn(torch::nn::BatchNorm2dOptions(3).momentum(0.1));
  {
    torch::NoGradGuard g;
    bn->weight.copy_(torch::rand({3}) + 0.5);
    bn->bias.copy_(torch::randn({3}));
    bn->running_mean.copy_(torch::randn({3}));
    bn->running_var.copy_(torch::rand({3}) + 0.5);
  }
  torch::Tensor rm = bn->running_mean.clone(), rv = bn->running_var.clone();
  const BnFinal f = ops().finalize(y.sum({0, 2, 3}), (y * y).sum({0, 2, 3}), 100, bn->weight,
                                   bn->bias, rm, rv, 0.1, 1e-5);
  bn->train();
  const torch::Tensor ref = bn->forward(y);
  const torch::Tensor got = y * f.scale.view({1, -1, 1, 1}) + f.bias.view({1, -1, 1, 1});
  EXPECT_LT(rel(got, ref.detach()), kTol);
  EXPECT_LT(rel(rm, bn->running_mean), kTol);
  EXPECT_LT(rel(rv, bn->running_var), kTol);  // the unbiased variance, as BatchNorm keeps it
  EXPECT_LT(rel(f.mean, y.mean({0, 2, 3})), kTol);
}

// Coefficients a, b, c give BatchNorm's input gradient; the weight's and bias's are autograd's.
TEST(ConvBnOpsTest, TheBnGradientsAndTheirCoefficientsAreAutogradsOnes) {
  torch::manual_seed(3);
  const torch::Tensor x = nhwc(torch::randn({4, 3, 5, 5}) * 1.5 + 0.5).requires_grad_(true);
  const torch::Tensor weight = (torch::rand({3}) + 0.5).requires_grad_(true);
  const torch::Tensor bias = torch::randn({3}).requires_grad_(true);
  const torch::Tensor dz = nhwc(torch::randn({4, 3, 5, 5}));
  const torch::Tensor out = torch::batch_norm(x, weight, bias, {}, {}, true, 0.1, 1e-5, false);
  out.backward(dz);
  torch::Tensor rm = torch::zeros({3}), rv = torch::ones({3});
  const torch::Tensor xd = x.detach();
  const BnFinal f = ops().finalize(xd.sum({0, 2, 3}), (xd * xd).sum({0, 2, 3}), 100,
                                   weight.detach(), bias.detach(), rm, rv, 0.1, 1e-5);
  const BnGrads g = ops().bn_grads(dz, xd, f, weight.detach());
  EXPECT_LT(rel(g.dweight, weight.grad()), 1e-4);
  EXPECT_LT(rel(g.dbias, bias.grad()), 1e-4);
  EXPECT_LT(rel(ops().dbn_apply(g, xd), x.grad()), 1e-4);
}

// Two BNs whose outputs are added (a block's last BN and its shortcut's): bn_grads_pair gives each
// one's gradients, autograd's through the sum.
TEST(ConvBnOpsTest, TwoBnsWhoseOutputsAreAddedGetAutogradsGradients) {
  torch::manual_seed(5);
  const torch::Tensor x1 = nhwc(torch::randn({4, 3, 5, 5}) * 1.5 + 0.5).requires_grad_(true);
  const torch::Tensor x2 = nhwc(torch::randn({4, 3, 5, 5}) * 0.5 - 1.0).requires_grad_(true);
  const torch::Tensor w1 = (torch::rand({3}) + 0.5).requires_grad_(true);
  const torch::Tensor w2 = (torch::rand({3}) + 0.5).requires_grad_(true);
  const torch::Tensor b1 = torch::randn({3}).requires_grad_(true);
  const torch::Tensor b2 = torch::randn({3}).requires_grad_(true);
  const torch::Tensor dz = nhwc(torch::randn({4, 3, 5, 5}));
  (torch::batch_norm(x1, w1, b1, {}, {}, true, 0.1, 1e-5, false) +
   torch::batch_norm(x2, w2, b2, {}, {}, true, 0.1, 1e-5, false))
      .backward(dz);
  const auto input = [](const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
    torch::Tensor rm = torch::zeros({3}), rv = torch::ones({3});
    const torch::Tensor xd = x.detach();
    return BnInput{xd,
                   ops().finalize(xd.sum({0, 2, 3}), (xd * xd).sum({0, 2, 3}), 100, w.detach(),
                                  b.detach(), rm, rv, 0.1, 1e-5),
                   w.detach()};
  };
  const BnInput first = input(x1, w1, b1), second = input(x2, w2, b2);
  const auto [g1, g2] = ops().bn_grads_pair(dz, first, second);
  EXPECT_LT(rel(g1.dweight, w1.grad()), 1e-4);
  EXPECT_LT(rel(g1.dbias, b1.grad()), 1e-4);
  EXPECT_LT(rel(g2.dweight, w2.grad()), 1e-4);
  EXPECT_LT(rel(g2.dbias, b2.grad()), 1e-4);
  EXPECT_LT(rel(ops().dbn_apply(g1, first.x), x1.grad()), 1e-4);
  EXPECT_LT(rel(ops().dbn_apply(g2, second.x), x2.grad()), 1e-4);
}

// dgrad and wgrad are autograd's convolution gradients; dgrad_drelu_bn is ReLU's and BN's after
// it, with the BN folded as finalize folds it.
TEST(ConvBnOpsTest, TheConvolutionsGradientsAndTheReluBnChainAreAutogradsOnes) {
  torch::manual_seed(4);
  const torch::Tensor a = nhwc(torch::randn({2, 4, 8, 8})).requires_grad_(true);  // BN's input
  const torch::Tensor weight = (torch::rand({4}) + 0.5).requires_grad_(true);
  const torch::Tensor bias = (torch::randn({4}) * 0.1).requires_grad_(true);
  const torch::Tensor w = nhwc(torch::randn({6, 4, 3, 3})).requires_grad_(true);
  const torch::Tensor dy = nhwc(torch::randn({2, 6, 4, 4}));
  const torch::Tensor r =
      torch::relu(torch::batch_norm(a, weight, bias, {}, {}, true, 0.1, 1e-5, false));
  const torch::Tensor y = torch::conv2d(r, w, {}, 2, 1);
  y.backward(dy);

  const torch::Tensor ad = a.detach();
  torch::Tensor rm = torch::zeros({4}), rv = torch::ones({4});
  const BnFinal f = ops().finalize(ad.sum({0, 2, 3}), (ad * ad).sum({0, 2, 3}), 2 * 8 * 8,
                                   weight.detach(), bias.detach(), rm, rv, 0.1, 1e-5);
  const ConvSpec spec{1, 2};
  EXPECT_LT(rel(ops().wgrad(ad, dy, spec, w.sizes(), Prologue{f.scale, f.bias}), w.grad()), 1e-4);
  const BnGrads g = ops().dgrad_drelu_bn(dy, w.detach(), spec, ad, f, weight.detach());
  EXPECT_LT(rel(g.dweight, weight.grad()), 1e-4);
  EXPECT_LT(rel(g.dbias, bias.grad()), 1e-4);
  EXPECT_LT(rel(ops().dbn_apply(g, ad), a.grad()), 1e-4);
  // dgrad alone: the gradient of the convolution's input.
  const torch::Tensor rin = r.detach().requires_grad_(true);
  torch::conv2d(rin, w.detach(), {}, 2, 1).backward(dy);
  EXPECT_LT(rel(ops().dgrad(dy, w.detach(), spec, rin.sizes()), rin.grad()), kTol);
  // With a second path's gradient added (a block's input: the shortcut's).
  const torch::Tensor other = nhwc(torch::randn(rin.sizes()));
  EXPECT_LT(rel(ops().dgrad_add(dy, w.detach(), spec, other, {}), rin.grad() + other), kTol);
  // ... and through the ReLU whose output the input is: zero where it is.
  const torch::Tensor relu_out = r.detach();
  ASSERT_GT(relu_out.eq(0).sum().item<std::int64_t>(), 0);
  EXPECT_LT(rel(ops().dgrad_add(dy, w.detach(), spec, other, relu_out),
                (rin.grad() + other) * relu_out.gt(0)),
            kTol);
}

TEST(ConvBnOpsTest, TheOutputAddsTheResidualThroughItsBnOrAsItIs) {
  torch::manual_seed(5);
  const torch::Tensor y = nhwc(torch::randn({2, 3, 4, 4})), r = nhwc(torch::randn({2, 3, 4, 4}));
  const BnFinal bn{torch::zeros({3}), torch::ones({3}), torch::rand({3}) + 0.5, torch::randn({3})};
  const BnFinal rb{torch::zeros({3}), torch::ones({3}), torch::rand({3}) + 0.5, torch::randn({3})};
  const auto pc = [](const torch::Tensor& v) { return v.view({1, -1, 1, 1}); };
  EXPECT_LT(rel(ops().output(y, bn, r, nullptr), torch::relu(y * pc(bn.scale) + pc(bn.bias) + r)),
            kTol);
  EXPECT_LT(rel(ops().output(y, bn, r, &rb),
                torch::relu(y * pc(bn.scale) + pc(bn.bias) + r * pc(rb.scale) + pc(rb.bias))),
            kTol);
}

}  // namespace
}  // namespace workload
