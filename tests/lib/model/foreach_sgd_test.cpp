// Tests for ForeachSgd: identical results to LibTorch's per-parameter SGD, step by step, and each
// step's learning rate from its schedule.
#include "lib/model/foreach_sgd.h"

#include <gtest/gtest.h>

#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <functional>
#include <utility>
#include <vector>

#include "lib/device/cuda_device.h"
#include "lib/model/lr_schedule.h"
#include "lib/model/resnet50.h"

#if defined(WORKLOAD_TORCH_CUDA)
#include <torch/cuda.h>
#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <ATen/cuda/CUDAGraph.h>
#endif
#endif

namespace workload {
namespace {

// Three steps of a ResNet-50 under `ours` and, from the same weights, under LibTorch's SGD with
// lr_at(k) at step k (momentum 0.9, weight decay 1e-4): every parameter equal after each step.
void expect_same_steps_as_torch_sgd(
    const std::function<ForeachSgd(std::vector<torch::Tensor>)>& ours,
    const std::function<double(int)>& lr_at) {
  torch::manual_seed(5);
  ResNet50 a(4);
  ResNet50 b(4);
  {
    torch::NoGradGuard g;
    auto pa = a->parameters(), pb = b->parameters();
    for (size_t i = 0; i < pa.size(); ++i) pb[i].copy_(pa[i]);
  }
  ForeachSgd fa = ours(a->parameters());
  torch::optim::SGD fb(b->parameters(),
                       torch::optim::SGDOptions(lr_at(0)).momentum(0.9).weight_decay(1e-4));
  const auto x = torch::randn({4, 3, 32, 32});
  const auto y = torch::randint(4, {4}, torch::kInt64);
  for (int step = 0; step < 3; ++step) {
    for (auto* m : {&a, &b}) {
      for (auto& p : (*m)->parameters()) p.mutable_grad().reset();
      torch::nn::functional::cross_entropy((*m)->forward(x), y).backward();
    }
    static_cast<torch::optim::SGDOptions&>(fb.param_groups()[0].options()).lr(lr_at(step));
    fa.step();
    fb.step();
    const auto pa = a->parameters(), pb = b->parameters();
    for (size_t i = 0; i < pa.size(); ++i) {
      ASSERT_TRUE(torch::equal(pa[i], pb[i])) << "step " << step << " parameter " << i;
    }
  }
}

// A cosine of 6 steps, 2 of them warming up to 0.5: every step's LR differs.
LrSchedule short_cosine() {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kCosine;
  o.peak_lr = 0.5;
  o.warmup_steps = 2;
  o.total_steps = 6;
  return LrSchedule(o);
}

TEST(ForeachSgdTest, MatchesTorchOptimSgdExactly) {
  expect_same_steps_as_torch_sgd(
      [](std::vector<torch::Tensor> p) { return ForeachSgd(std::move(p), 0.05, 0.9, 1e-4); },
      [](int) { return 0.05; });
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

// The weight decay goes into the gradients in place (no new tensor a parameter): what step()
// leaves in them is grad + weight_decay * p, p taken before the update.
TEST(ForeachSgdTest, WeightDecayIsAddedToTheGradientsInPlace) {
  auto w = torch::full({3}, 2.0, torch::requires_grad());
  ForeachSgd opt({w}, 0.5, 0.0, 0.25);
  (w * 3).sum().backward();
  const torch::Tensor grad = w.grad();
  opt.step();
  EXPECT_TRUE(w.grad().is_same(grad)) << "the same gradient tensor, not a new one";
  EXPECT_TRUE(torch::allclose(w.grad(), torch::full({3}, 3.5)));     // 3 + 0.25 * 2
  EXPECT_TRUE(torch::allclose(w.detach(), torch::full({3}, 0.25)));  // 2 - 0.5 * 3.5
}

// A constant schedule is the article's step: the scalar LR, the same numbers as LibTorch's SGD.
// Any other schedule read from the host is LibTorch's SGD with the LR set before each step.
TEST(ForeachSgdTest, ASchedulePassedFromTheHostIsLibTorchsSgdWithItsLrSetEachStep) {
  LrScheduleOptions constant;
  constant.kind = LrScheduleKind::kConstant;
  constant.peak_lr = 0.1;
  constant.total_steps = 3;
  LrScheduleOptions cosine = constant;
  cosine.kind = LrScheduleKind::kCosine;
  cosine.warmup_steps = 2;
  for (const LrSchedule& schedule : {LrSchedule(constant), LrSchedule(cosine)}) {
    expect_same_steps_as_torch_sgd(
        [&](std::vector<torch::Tensor> p) {
          ForeachSgd sgd(std::move(p), schedule, 0.9, 1e-4, ForeachSgd::LrSource::kHost);
          EXPECT_FALSE(sgd.lr_on_device());
          return sgd;
        },
        [&](int k) { return schedule.lr_at(k); });
  }
  // The constant schedule read "from the device" is still the scalar.
  EXPECT_FALSE(
      ForeachSgd({torch::zeros({1})}, LrSchedule(constant), 0.9, 0, ForeachSgd::LrSource::kDevice)
          .lr_on_device());
}

// Any other schedule: step k subtracts lr_at(k) x the update, from the host as the scalar of the
// same kernels, or read from the table on the device at the optimizer's own count; past the end,
// the last LR.
TEST(ForeachSgdTest, AScheduleGivesEachStepItsLearningRate) {
  const LrSchedule schedule = short_cosine();
  for (const ForeachSgd::LrSource source :
       {ForeachSgd::LrSource::kHost, ForeachSgd::LrSource::kDevice}) {
    const bool device = source == ForeachSgd::LrSource::kDevice;
    auto w = torch::zeros({3}, torch::requires_grad());
    ForeachSgd opt({w}, schedule, 0.0, 0.0, source);
    EXPECT_EQ(opt.lr_on_device(), device);
    torch::Tensor expected = torch::zeros({3});
    const torch::Tensor g = torch::tensor({1.0f, -2.0f, 3.0f});
    for (int k = 0; k < 8; ++k) {
      w.mutable_grad() = g.clone();
      opt.step();
      if (device) {
        // p + g * (-lr): the float product, then the sum.
        expected = expected + g * torch::tensor(static_cast<float>(-schedule.lr_at(k)));
      } else {
        expected = expected.add(g, -schedule.lr_at(k));  // the scalar step's own arithmetic
      }
      ASSERT_TRUE(torch::equal(w.detach(), expected))
          << (device ? "device" : "host") << " step " << k << ": " << w << expected;
    }
  }
  // The schedule changed the steps: not all the same size.
  EXPECT_NE(schedule.lr_at(0), schedule.lr_at(1));
  EXPECT_NE(schedule.lr_at(3), schedule.lr_at(5));
}

TEST(ForeachSgdTest, AStateLoadedIntoAFreshOptimizerContinuesTheSameSteps) {
  const LrSchedule schedule = short_cosine();
  for (const ForeachSgd::LrSource source :
       {ForeachSgd::LrSource::kHost, ForeachSgd::LrSource::kDevice}) {
    auto a = torch::zeros({2, 3}, torch::requires_grad());
    auto unused = torch::zeros({2}, torch::requires_grad());  // never a gradient: no buffer
    ForeachSgd whole({a, unused}, schedule, 0.9, 1e-2, source);
    const auto grad = [](int k) { return torch::full({2, 3}, 0.5f + static_cast<float>(k)); };
    for (int k = 0; k < 3; ++k) {
      a.mutable_grad() = grad(k);
      whole.step();
    }
    // A checkpoint after step 3: the parameter's value and the optimizer's state.
    ForeachSgd::State saved = whole.state();
    EXPECT_EQ(saved.steps, 3);
    ASSERT_TRUE(saved.momentum[0].defined());
    EXPECT_FALSE(saved.momentum[1].defined());
    saved.momentum[0] = saved.momentum[0].clone();
    auto b = a.detach().clone().requires_grad_(true);
    auto unused_b = torch::zeros({2}, torch::requires_grad());
    ForeachSgd resumed({b, unused_b}, schedule, 0.9, 1e-2, source);
    resumed.load_state(saved);
    for (int k = 3; k < 6; ++k) {
      a.mutable_grad() = grad(k);
      whole.step();
      b.mutable_grad() = grad(k);
      resumed.step();
      ASSERT_TRUE(torch::equal(a.detach(), b.detach())) << "step " << k;
    }
    // Buffers that do not fit the parameters are refused.
    ForeachSgd::State wrong{{torch::zeros({3, 2}), torch::Tensor()}, 1};
    EXPECT_THROW(resumed.load_state(wrong), std::invalid_argument);
    EXPECT_THROW(resumed.load_state({{torch::zeros({2, 3})}, 1}), std::invalid_argument);
  }
}

// step(found_inf): a set flag changes no parameter, buffer or gradient and moves the schedule on;
// a clear one is step(). On the CPU the flag is read on the host.
TEST(ForeachSgdTest, AFoundInfFlagSkipsTheUpdateAndTheScheduleMovesOn) {
  const LrSchedule schedule = short_cosine();
  for (const ForeachSgd::LrSource source :
       {ForeachSgd::LrSource::kHost, ForeachSgd::LrSource::kDevice}) {
    auto a = torch::zeros({2, 3}, torch::requires_grad());
    auto b = torch::zeros({2, 3}, torch::requires_grad());
    ForeachSgd skipping({a}, schedule, 0.9, 1e-2, source);
    ForeachSgd plain({b}, schedule, 0.9, 1e-2, source);
    EXPECT_FALSE(skipping.skips_on_device());
    const torch::Tensor clear = torch::zeros({1}), set = torch::ones({1});
    const auto grad = [](int k) { return torch::full({2, 3}, 0.5f + static_cast<float>(k)); };
    for (int k = 0; k < 5; ++k) {
      a.mutable_grad() = grad(k);
      if (k == 0 || k == 2) {
        const torch::Tensor before = a.detach().clone(), grad_before = a.grad().clone();
        const auto momentum_before = skipping.state().momentum[0];
        const bool had_buffer = momentum_before.defined();
        const torch::Tensor kept = had_buffer ? momentum_before.clone() : torch::Tensor();
        skipping.step(set);
        EXPECT_TRUE(torch::equal(a.detach(), before)) << "step " << k;
        EXPECT_TRUE(torch::equal(a.grad(), grad_before)) << "step " << k;
        const auto momentum_after = skipping.state().momentum[0];
        EXPECT_EQ(momentum_after.defined(), had_buffer) << "step " << k;
        if (had_buffer) {
          EXPECT_TRUE(torch::equal(momentum_after, kept)) << "step " << k;
        }
      } else {
        skipping.step(clear);
        // The plain optimizer takes the same update at the same LR: it too skipped step 0 and 2.
        b.mutable_grad() = grad(k);
        ASSERT_EQ(plain.state().steps, k);
        plain.step();
        ASSERT_TRUE(torch::equal(a.detach(), b.detach())) << "step " << k;
      }
      EXPECT_EQ(skipping.state().steps, k + 1);
      if (k == 0 || k == 2) {
        plain.load_state({plain.state().momentum, k + 1});  // the same skip, by hand
      }
    }
  }
  auto w = torch::zeros({3}, torch::requires_grad());
  ForeachSgd opt({w}, 0.1, 0.9, 0);
  w.mutable_grad() = torch::ones({3});
  EXPECT_THROW(opt.step(torch::Tensor()), std::invalid_argument);
  EXPECT_THROW(opt.step(torch::zeros({2})), std::invalid_argument);
  EXPECT_THROW(opt.step(torch::zeros({1}, torch::kInt32)), std::invalid_argument);
}

#if defined(WORKLOAD_TORCH_CUDA)
// On CUDA (LibTorch 2.4 and later) the flag is read by PyTorch's fused kernel: the same steps as
// the foreach ones within float rounding, a set flag skips on the device, and a CUDA graph that
// captured one step replays both.
TEST(ForeachSgdCudaTest, TheFusedStepSkipsOnTheDeviceAndMatchesTheForeachOne) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  const torch::Device gpu(torch::kCUDA, 0);
  const LrSchedule schedule = short_cosine();
  for (const ForeachSgd::LrSource source :
       {ForeachSgd::LrSource::kHost, ForeachSgd::LrSource::kDevice}) {
    torch::manual_seed(3);
    const auto o = torch::TensorOptions().device(gpu);
    auto a = torch::randn({64, 16, 3, 3}, o).contiguous(torch::MemoryFormat::ChannelsLast);
    a.requires_grad_(true);
    auto b = a.detach().clone().requires_grad_(true);
    ForeachSgd fused({a}, schedule, 0.9, 1e-4, source);
    ForeachSgd multi({b}, schedule, 0.9, 1e-4, source);
    if (!fused.skips_on_device()) GTEST_SKIP() << "this LibTorch has no fused SGD";
    const torch::Tensor clear = torch::zeros({1}, o), set = torch::ones({1}, o);
    for (int k = 0; k < 6; ++k) {
      const torch::Tensor g = torch::randn_like(a);
      a.mutable_grad() = g.clone();
      b.mutable_grad() = g.clone();
      if (k == 0 || k == 3) {
        const torch::Tensor before = a.detach().clone();
        fused.step(set);
        EXPECT_TRUE(torch::equal(a.detach(), before)) << "step " << k;
        multi.load_state({multi.state().momentum, k + 1});
      } else {
        fused.step(clear);
        multi.step();
      }
      // The same sums, rounded apart (a fused multiply-add against a product and a sum).
      const double err = (a.detach() - b.detach()).abs().max().item<double>() /
                         b.detach().abs().max().item<double>();
      EXPECT_LT(err, 1e-5) << (source == ForeachSgd::LrSource::kHost ? "host" : "device")
                           << " LR, step " << k;
    }
  }
}

#if TORCH_VERSION_MAJOR >= 2
// One step captured in a CUDA graph (the LR read on the device): each replay updates or skips as
// the flag written before it says, with nothing from the host.
TEST(ForeachSgdCudaTest, AGraphReplaysTheSkipAndTheUpdate) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  use_cuda_device(0, false);
  StepStream stream(true);  // captured on a stream other than the legacy default one
  const torch::Device gpu(torch::kCUDA, 0);
  const auto o = torch::TensorOptions().device(gpu);
  auto w = torch::zeros({256}, o).requires_grad_(true);
  ForeachSgd opt({w}, short_cosine(), 0.0, 0.0, ForeachSgd::LrSource::kDevice);
  if (!opt.skips_on_device()) GTEST_SKIP() << "this LibTorch has no fused SGD";
  w.mutable_grad() = torch::ones({256}, o);
  torch::Tensor found_inf = torch::zeros({1}, o);
  opt.step(found_inf);  // step 0 eagerly, as the warm-up does
  device_synchronize();
  at::cuda::CUDAGraph graph;
  graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
  opt.step(found_inf);
  graph.capture_end();
  // The capture ran nothing: w is still 0 - lr(0). Replays: steps 1 to 4, step 2 skipped.
  const LrSchedule schedule = short_cosine();
  double expected = -schedule.lr_at(0);
  for (int k = 1; k < 5; ++k) {
    found_inf.fill_(k == 2 ? 1.0f : 0.0f);
    graph.replay();
    device_synchronize();
    if (k != 2) expected -= static_cast<float>(schedule.lr_at(k));
    EXPECT_NEAR(w[0].item<double>(), expected, 1e-6) << "replay for step " << k;
  }
}
#endif
#endif

}  // namespace
}  // namespace workload
