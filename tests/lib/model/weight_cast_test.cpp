// Tests for cast_together and ForwardWeights: the values and gradients of one cast per tensor
// (`.to()`), bit for bit, the layout kept, one autograd node for the whole list, and the errors.
#include "lib/model/weight_cast.h"

#include <gtest/gtest.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/function.h>

#include <string>
#include <vector>

#include "lib/device/cuda_device.h"

namespace workload {
namespace {

// Weights shaped as a model's: 4-D channels_last ones, a matrix and a vector, requiring gradients.
std::vector<torch::Tensor> make_weights(torch::Device device) {
  torch::manual_seed(7);
  const auto f32 = torch::TensorOptions().device(device);
  std::vector<torch::Tensor> w = {
      torch::randn({16, 8, 3, 3}, f32).contiguous(torch::MemoryFormat::ChannelsLast),
      torch::randn({32, 16, 1, 1}, f32).contiguous(torch::MemoryFormat::ChannelsLast),
      torch::randn({10, 32}, f32), torch::randn({10}, f32)};
  for (auto& t : w) t.requires_grad_(true);
  return w;
}

// sum_i <copies[i], r_i> for fixed random r_i: every element of every copy gets its own gradient.
torch::Tensor loss_of(const std::vector<torch::Tensor>& copies) {
  torch::manual_seed(11);
  torch::Tensor loss = torch::zeros({}, copies[0].options().dtype(torch::kFloat));
  for (const auto& c : copies) loss = loss + (c * torch::randn_like(c)).to(torch::kFloat).sum();
  return loss;
}

bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && torch::equal(a, b);
}

void expect_per_tensor_casts(torch::Device device) {
  const std::vector<torch::Tensor> w = make_weights(device);
  const std::vector<torch::Tensor> together = cast_together(w, torch::kBFloat16);
  ASSERT_EQ(together.size(), w.size());
  std::vector<torch::Tensor> each;
  for (const auto& t : w) each.push_back(t.to(torch::kBFloat16));
  for (std::size_t i = 0; i < w.size(); ++i) {
    EXPECT_TRUE(same_bits(together[i], each[i])) << "tensor " << i;
    EXPECT_EQ(together[i].strides(), w[i].strides()) << "tensor " << i << ": layout kept";
    EXPECT_TRUE(together[i].requires_grad());
  }
  // Each weight's gradient is the one the per-tensor casts' backward gives, bit for bit.
  const std::vector<torch::Tensor> g_together =
      torch::autograd::grad({loss_of(together)}, w, {}, /*retain_graph=*/false);
  const std::vector<torch::Tensor> g_each =
      torch::autograd::grad({loss_of(each)}, w, {}, /*retain_graph=*/false);
  for (std::size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(g_together[i].scalar_type(), torch::kFloat) << "tensor " << i;
    EXPECT_TRUE(same_bits(g_together[i], g_each[i])) << "tensor " << i;
    EXPECT_EQ(g_together[i].strides(), g_each[i].strides()) << "tensor " << i;
  }
}

TEST(WeightCastTest, CastTogetherIsEachTensorsToBitForBitValuesAndGradients) {
  expect_per_tensor_casts(torch::kCPU);
}

TEST(WeightCastTest, CastTogetherIsOneAutogradNodeForTheWholeList) {
  const std::vector<torch::Tensor> w = make_weights(torch::kCPU);
  const std::vector<torch::Tensor> copies = cast_together(w, torch::kBFloat16);
  const auto node = copies[0].grad_fn();
  ASSERT_NE(node, nullptr);
  EXPECT_NE(node->name().find("CastTogether"), std::string::npos) << node->name();
  for (const auto& c : copies) EXPECT_EQ(c.grad_fn(), node);
  EXPECT_EQ(node->num_inputs(), w.size());  // one gradient in for each copy
  // And it reaches each weight's accumulator, once.
  ASSERT_EQ(node->next_edges().size(), w.size());
  for (const auto& e : node->next_edges()) EXPECT_TRUE(e.is_valid());
}

TEST(WeightCastTest, UnusedCopiesGiveNoGradient) {
  const std::vector<torch::Tensor> w = make_weights(torch::kCPU);
  const std::vector<torch::Tensor> copies = cast_together(w, torch::kBFloat16);
  // Only the first copy reaches the loss: the others' weights get no gradient at all.
  (copies[0].to(torch::kFloat).sum()).backward();
  ASSERT_TRUE(w[0].grad().defined());
  EXPECT_TRUE(torch::all(w[0].grad() == 1).item<bool>());
  for (std::size_t i = 1; i < w.size(); ++i) EXPECT_FALSE(w[i].grad().defined()) << i;
}

TEST(WeightCastTest, WithoutGradientsTheCopiesAreValuesOnly) {
  const std::vector<torch::Tensor> w = make_weights(torch::kCPU);
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> copies = cast_together(w, torch::kBFloat16);
  for (std::size_t i = 0; i < w.size(); ++i) {
    EXPECT_FALSE(copies[i].requires_grad());
    EXPECT_TRUE(same_bits(copies[i], w[i].to(torch::kBFloat16)));
  }
}

TEST(WeightCastTest, RefusesMixedListsAndNonFloatingTargets) {
  std::vector<torch::Tensor> w = make_weights(torch::kCPU);
  EXPECT_TRUE(cast_together({}, torch::kBFloat16).empty());
  EXPECT_THROW(cast_together(w, torch::kInt), c10::Error);
  w.push_back(torch::ones({3}, torch::kDouble));
  try {
    cast_together(w, torch::kBFloat16);
    FAIL() << "a mixed list was cast";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 4 is Double"), std::string::npos) << e.what();
  }
  w.back() = torch::Tensor();
  EXPECT_THROW(cast_together(w, torch::kBFloat16), c10::Error);
}

TEST(WeightCastTest, ForwardWeightsHandsOutTheCopiesOfItsListOnly) {
  const std::vector<torch::Tensor> w = make_weights(torch::kCPU);
  const torch::Tensor other = torch::ones({2});
  const ForwardWeights none;
  EXPECT_FALSE(none.cast());
  EXPECT_TRUE(none[w[0]].is_same(w[0]));
  const ForwardWeights cast({w[0], w[2]}, torch::kBFloat16);
  EXPECT_TRUE(cast.cast());
  EXPECT_EQ(cast[w[0]].scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(same_bits(cast[w[2]], w[2].to(torch::kBFloat16)));
  EXPECT_TRUE(cast[w[1]].is_same(w[1]));  // not in the list: the weight itself
  EXPECT_TRUE(cast[other].is_same(other));
  // A copy of the handle finds the same copy (the key is the tensor, not the handle).
  const torch::Tensor alias = w[0];
  EXPECT_TRUE(cast[alias].is_same(cast[w[0]]));
}

// On CUDA the list takes LibTorch's multi-tensor copy: the same bits as the per-tensor casts.
TEST(WeightCastTest, GpuCastTogetherIsEachTensorsToBitForBit) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  expect_per_tensor_casts(torch::kCUDA);
}

}  // namespace
}  // namespace workload
