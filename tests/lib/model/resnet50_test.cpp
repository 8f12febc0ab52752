// Tests for ResNet50: torchvision's architecture (parameter count, names, init), channels_last,
// the hooked forward, and that one SGD step lowers the loss on a fixed batch.
#include "lib/model/resnet50.h"

#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <vector>

namespace workload {
namespace {

TEST(ResNet50Test, ParameterCountMatchesTorchvision) {
  EXPECT_EQ(count_parameters(*ResNet50(101)), 23714981);
  EXPECT_EQ(count_parameters(*ResNet50(1000)), 25557032);  // torchvision's resnet50()
}

TEST(ResNet50Test, NamesMatchTorchvisionStateDictKeys) {
  ResNet50 m(101);
  const auto params = m->named_parameters();
  for (const char* key :
       {"conv1.weight", "bn1.weight", "layer1.0.conv1.weight", "layer1.0.downsample.0.weight",
        "layer1.0.downsample.1.bias", "layer2.3.conv3.weight", "layer3.5.bn2.weight",
        "layer4.2.conv2.weight", "fc.weight", "fc.bias"}) {
    EXPECT_TRUE(params.contains(key)) << key;
  }
  EXPECT_FALSE(params.contains("layer1.1.downsample.0.weight"));
  EXPECT_EQ(params.size(), 161u);  // torchvision's resnet50 has 161 parameter tensors
  EXPECT_TRUE(m->named_buffers().contains("layer4.2.bn3.running_var"));
  // v1.5: the stride sits on the 3x3 convolution of each stage's first block.
  EXPECT_EQ(params["layer2.0.conv2.weight"].sizes(), (std::vector<std::int64_t>{128, 128, 3, 3}));
}

TEST(ResNet50Test, InitialisationFollowsTorchvision) {
  torch::manual_seed(0);
  ResNet50 m(101);
  const auto params = m->named_parameters();
  // kaiming_normal_(mode=fan_out, relu): std = sqrt(2 / (out_channels * kh * kw)).
  const auto w = params["layer3.0.conv2.weight"];  // 256 x 256 x 3 x 3
  EXPECT_NEAR(w.std().item<double>(), std::sqrt(2.0 / (256 * 9)), 0.002);
  EXPECT_NEAR(w.mean().item<double>(), 0.0, 0.002);
  EXPECT_TRUE(torch::all(params["layer1.0.bn1.weight"] == 1).item<bool>());
  EXPECT_TRUE(torch::all(params["layer1.0.bn1.bias"] == 0).item<bool>());
  // Linear keeps PyTorch's default: uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias.
  EXPECT_LE(params["fc.bias"].abs().max().item<double>(), 1.0 / std::sqrt(2048.0) + 1e-7);
}

TEST(ResNet50Test, OutputShapeAndChannelsLast) {
  ResNet50 m(7);
  to_channels_last(*m);
  for (const auto& p : m->parameters()) {
    if (p.dim() == 4) EXPECT_TRUE(p.is_contiguous(torch::MemoryFormat::ChannelsLast));
  }
  const auto x = torch::randn({2, 3, 64, 64}).contiguous(torch::MemoryFormat::ChannelsLast);
  const auto y = m->forward(x);
  EXPECT_EQ(y.sizes(), (std::vector<std::int64_t>{2, 7}));
}

TEST(ResNet50Test, HookedForwardIsTheSameComputationInOrder) {
  torch::manual_seed(3);
  ResNet50 m(5);
  m->eval();
  const auto x = torch::randn({1, 3, 64, 64});
  std::vector<std::string> events;
  const auto y1 = m->forward_with_hook(x, [&](const char* name, bool enter) {
    events.push_back(std::string(enter ? "+" : "-") + name);
  });
  EXPECT_TRUE(torch::allclose(y1, m->forward(x)));
  ASSERT_EQ(events.size(), 2u * (1 + 4 + 16 + 1));
  EXPECT_EQ(events.front(), "+stem");
  EXPECT_EQ(events[2], "+layer1");
  EXPECT_EQ(events[3], "+layer1.0");
  EXPECT_EQ(events[4], "-layer1.0");
  EXPECT_EQ(events[events.size() - 3], "-layer4");
  EXPECT_EQ(events.back(), "-fc");
}

TEST(ResNet50Test, InitialLossIsNearLogKAndOneStepLowersIt) {
  torch::manual_seed(1);
  ResNet50 m(10);
  to_channels_last(*m);
  m->train();
  const auto x = torch::randn({8, 3, 32, 32}).contiguous(torch::MemoryFormat::ChannelsLast);
  const auto y = torch::randint(10, {8}, torch::kInt64);
  // A small plain gradient step: first-order decrease, whatever the random batch's curvature.
  torch::optim::SGD opt(m->parameters(), torch::optim::SGDOptions(1e-3));
  const auto loss0 = torch::nn::functional::cross_entropy(m->forward(x), y);
  EXPECT_LT(std::fabs(loss0.item<double>() - std::log(10.0)), 2.0);
  opt.zero_grad();
  loss0.backward();
  opt.step();
  const auto loss1 = torch::nn::functional::cross_entropy(m->forward(x), y);
  EXPECT_LT(loss1.item<double>(), loss0.item<double>());
}

}  // namespace
}  // namespace workload
