// Tests for the fused bottleneck (lib/model/fused_bottleneck.h) on the reference pieces, on the
// CPU in fp32: the block's output, every gradient and the running statistics as the modules make
// them, with and without the shortcut's convolution, the weights' copies made together, two blocks
// linked through the ReLU between them, and the blocks it refuses.
#include "lib/model/fused_bottleneck.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "lib/model/resnet50.h"
#include "lib/model/weight_cast.h"

namespace workload {
namespace {

double rel(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).norm().item<double>() /
         std::max(b.to(torch::kDouble).norm().item<double>(), 1e-30);
}

/// Two blocks of the same weights (BN weights and biases moved off 1 and 0), channels_last, in
/// training mode.
std::pair<Bottleneck, Bottleneck> twin_blocks(std::int64_t in, std::int64_t planes,
                                              std::int64_t stride) {
  torch::manual_seed(7);
  Bottleneck a(in, planes, stride), b(in, planes, stride);
  torch::NoGradGuard g;
  for (auto& p : a->named_parameters()) {
    if (p.key().find("bn") != std::string::npos ||
        p.key().find("downsample.1") != std::string::npos) {
      p.value().copy_(p.key().find("weight") != std::string::npos
                          ? torch::rand_like(p.value()) + 0.5
                          : torch::randn_like(p.value()) * 0.1);
    }
  }
  const auto pa = a->named_parameters();
  for (auto& p : b->named_parameters()) p.value().copy_(pa[p.key()]);
  for (Bottleneck* m : {&a, &b}) {
    to_channels_last(**m);
    (*m)->train();
  }
  return {a, b};
}

// One step of each block on the same input: the outputs, the input's and every parameter's
// gradient, and every buffer (running statistics, counters) match.
void expect_same_step(std::int64_t in, std::int64_t planes, std::int64_t stride,
                      std::int64_t batch = 4, std::int64_t side = 8) {
  auto [modules, fused] = twin_blocks(in, planes, stride);
  torch::manual_seed(8);
  const torch::Tensor x0 =
      torch::randn({batch, in, side, side}).contiguous(torch::MemoryFormat::ChannelsLast);
  const torch::Tensor xa = x0.clone().requires_grad_(true), xb = x0.clone().requires_grad_(true);
  const torch::Tensor ya = modules->forward(xa);
  const BottleneckModules m = fused->fusion_modules();
  ASSERT_TRUE(fusable(m));
  EXPECT_EQ(m.downsample_conv != nullptr, stride != 1 || in != planes * 4);
  const torch::Tensor yb = fused_bottleneck(reference_conv_bn_ops(), m, xb);
  EXPECT_LT(rel(yb, ya), 1e-5) << "output";
  const torch::Tensor probe = torch::randn_like(ya);
  (ya * probe).sum().backward();
  (yb * probe).sum().backward();
  EXPECT_LT(rel(xb.grad(), xa.grad()), 1e-4) << "input gradient";
  const auto pa = modules->named_parameters();
  for (const auto& p : fused->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_EQ(p.value().grad().scalar_type(), torch::kFloat) << p.key();
    EXPECT_LT(rel(p.value().grad(), pa[p.key()].grad()), 1e-4) << p.key();
  }
  const auto ba = modules->named_buffers();
  for (const auto& b : fused->named_buffers()) {
    EXPECT_LT(rel(b.value(), ba[b.key()]), 1e-5) << b.key();
  }
}

TEST(FusedBottleneckTest, AnIdentityBlockStepsAsItsModules) { expect_same_step(16, 4, 1); }

TEST(FusedBottleneckTest, ADownsamplingBlockStepsAsItsModules) { expect_same_step(8, 4, 2); }

// ResNet-50's last blocks see few values a channel (batch x 2 x 2).
TEST(FusedBottleneckTest, AWideBlockOnATinyMapStepsAsItsModules) {
  expect_same_step(256, 64, 1, 2, 2);
}

// The weights' copies made together for the forward (ForwardWeights) are what the block's node
// takes: its edges lead to the one cast node, the values and every gradient are those of the
// block casting each weight itself, and the batch norms' gradients keep their own dtype.
TEST(FusedBottleneckTest, WeightsCastTogetherAreTheCopiesTheBlockUses) {
  auto [own, shared] = twin_blocks(8, 4, 2);
  torch::manual_seed(8);
  const torch::Tensor x0 =
      torch::randn({2, 8, 6, 6}, torch::kDouble).contiguous(torch::MemoryFormat::ChannelsLast);
  const torch::Tensor xa = x0.clone().requires_grad_(true), xb = x0.clone().requires_grad_(true);
  const torch::Tensor ya = fused_bottleneck(reference_conv_bn_ops(), own->fusion_modules(), xa);
  const ForwardWeights w(shared->conv_weights(), torch::kDouble);
  const torch::Tensor yb =
      fused_bottleneck(reference_conv_bn_ops(), shared->fusion_modules(), xb, w);
  EXPECT_TRUE(torch::equal(ya, yb));
  // x, then the three convolutions' weights: the shared block's come from the cast node.
  const auto& edges = yb.grad_fn()->next_edges();
  for (std::size_t i = 1; i <= 3; ++i) {
    ASSERT_TRUE(edges[i].is_valid()) << i;
    EXPECT_NE(edges[i].function->name().find("CastTogether"), std::string::npos)
        << edges[i].function->name();
  }
  const torch::Tensor probe = torch::randn_like(ya);
  (ya * probe).sum().backward();
  (yb * probe).sum().backward();
  EXPECT_TRUE(torch::equal(xa.grad(), xb.grad()));
  const auto pa = own->named_parameters();
  for (const auto& p : shared->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_EQ(p.value().grad().scalar_type(), torch::kFloat) << p.key();
    EXPECT_TRUE(torch::equal(p.value().grad(), pa[p.key()].grad())) << p.key();
  }
}

// Two fused blocks in a row, linked (ReluLinks): the ReLU between them has its backward applied
// once, in the second block's input gradient, and the first block skips its own. The chain's
// output, the input's gradient and every parameter's are the modules' chain's. Half the first
// block's outputs are zeros, where a gradient applied twice is the same but one applied never is
// not: a link broken on either side fails the first block's gradients.
TEST(FusedBottleneckTest, TwoLinkedBlocksApplyTheReluBetweenThemOnce) {
  auto [a_modules, a_fused] = twin_blocks(16, 4, 1);
  auto [b_modules, b_fused] = twin_blocks(16, 4, 1);
  torch::manual_seed(9);
  const torch::Tensor x0 =
      torch::randn({4, 16, 8, 8}).contiguous(torch::MemoryFormat::ChannelsLast);
  const torch::Tensor xa = x0.clone().requires_grad_(true), xb = x0.clone().requires_grad_(true);
  const torch::Tensor ya = b_modules->forward(a_modules->forward(xa));
  const ConvBnOps& ops = reference_conv_bn_ops();
  const torch::Tensor mid = fused_bottleneck(ops, a_fused->fusion_modules(), xb, {},
                                             ReluLinks{/*input_relu=*/false,
                                                       /*output_grad_through_relu=*/true});
  EXPECT_GT(mid.eq(0).sum().item<std::int64_t>(), mid.numel() / 4);
  const torch::Tensor yb = fused_bottleneck(ops, b_fused->fusion_modules(), mid, {},
                                            ReluLinks{/*input_relu=*/true,
                                                      /*output_grad_through_relu=*/false});
  EXPECT_LT(rel(yb, ya), 1e-5) << "output";
  const torch::Tensor probe = torch::randn_like(ya);
  (ya * probe).sum().backward();
  (yb * probe).sum().backward();
  EXPECT_LT(rel(xb.grad(), xa.grad()), 1e-4) << "input gradient";
  for (const auto& [modules, fused] : {std::pair{a_modules, a_fused}, {b_modules, b_fused}}) {
    const auto pm = modules->named_parameters();
    for (const auto& p : fused->named_parameters()) {
      ASSERT_TRUE(p.value().grad().defined()) << p.key();
      EXPECT_LT(rel(p.value().grad(), pm[p.key()].grad()), 1e-4) << p.key();
    }
  }
}

TEST(FusedBottleneckTest, ABlockItCannotRunIsNotFusable) {
  auto [a, b] = twin_blocks(16, 4, 1);
  EXPECT_TRUE(fusable(a->fusion_modules()));
  a->eval();  // running statistics, not the batch's
  EXPECT_FALSE(fusable(a->fusion_modules()));
  BottleneckModules partial = b->fusion_modules();
  partial.bn2 = nullptr;
  EXPECT_FALSE(fusable(partial));
  EXPECT_THROW(fused_bottleneck(reference_conv_bn_ops(), partial, torch::randn({1, 16, 4, 4})),
               c10::Error);
}

}  // namespace
}  // namespace workload
