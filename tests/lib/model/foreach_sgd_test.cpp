// Tests for ForeachSgd: identical results to LibTorch's per-parameter SGD, step by step.
#include "lib/model/foreach_sgd.h"

#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include "lib/model/resnet50.h"

namespace workload {
namespace {

TEST(ForeachSgdTest, MatchesTorchOptimSgdExactly) {
  torch::manual_seed(5);
  ResNet50 a(4);
  ResNet50 b(4);
  {
    torch::NoGradGuard g;
    auto pa = a->parameters(), pb = b->parameters();
    for (size_t i = 0; i < pa.size(); ++i) pb[i].copy_(pa[i]);
  }
  ForeachSgd fa(a->parameters(), 0.05, 0.9, 1e-4);
  torch::optim::SGD fb(b->parameters(),
                       torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-4));
  const auto x = torch::randn({4, 3, 32, 32});
  const auto y = torch::randint(4, {4}, torch::kInt64);
  for (int step = 0; step < 3; ++step) {
    for (auto* m : {&a, &b}) {
      for (auto& p : (*m)->parameters()) p.mutable_grad().reset();
      torch::nn::functional::cross_entropy((*m)->forward(x), y).backward();
    }
    fa.step();
    fb.step();
    const auto pa = a->parameters(), pb = b->parameters();
    for (size_t i = 0; i < pa.size(); ++i) {
      ASSERT_TRUE(torch::equal(pa[i], pb[i])) << "step " << step << " parameter " << i;
    }
  }
}

TEST(ForeachSgdTest, SkipsParametersWithoutGradients) {
  auto w = torch::ones({3}, torch::requires_grad());
  auto v = torch::ones({2}, torch::requires_grad());
  ForeachSgd opt({w, v}, 0.5, 0.0, 0.0);
  (w * 2).sum().backward();
  opt.step();
  EXPECT_TRUE(torch::allclose(w, torch::zeros({3})));  // 1 - 0.5 * 2
  EXPECT_TRUE(torch::allclose(v, torch::ones({2})));
  EXPECT_THROW(ForeachSgd({w}, -1, 0, 0), std::invalid_argument);
}

}  // namespace
}  // namespace workload
