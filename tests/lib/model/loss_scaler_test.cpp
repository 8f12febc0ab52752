// Tests for LossScaler (lib/model/loss_scaler.h): GradScaler's defaults and rules as known answers
// on the CPU (the tensor operations), PyTorch's CUDA kernels against those operations, and the
// whole scaling captured in a CUDA graph and replayed with nothing from the host.
#include "lib/model/loss_scaler.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/version.h>  // TORCH_VERSION_MAJOR below: undefined (so 0) without it

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "lib/core/usage_error.h"
#include "lib/device/cuda_device.h"

#if defined(WORKLOAD_TORCH_CUDA) && TORCH_VERSION_MAJOR >= 2
#include <ATen/cuda/CUDAGraph.h>
#endif

namespace workload {
namespace {

using State = LossScaler::State;

bool same_state(const State& a, const State& b) {
  return a.scale == b.scale && a.growth_tracker == b.growth_tracker &&
         a.skipped_steps == b.skipped_steps;
}

std::vector<torch::Tensor> gradients(torch::Device device, float value) {
  const auto o = torch::TensorOptions().device(device);
  return {torch::full({3, 4}, value, o), torch::full({5}, value, o), torch::Tensor()};
}

TEST(LossScalerTest, TheDefaultsAreGradScalers) {
  const LossScaler s(torch::kCPU);
  EXPECT_TRUE(same_state(s.state(), {65536.0, 0, 0}));
  EXPECT_EQ(s.options().growth_factor, 2.0);
  EXPECT_EQ(s.options().backoff_factor, 0.5);
  EXPECT_EQ(s.options().growth_interval, 2000);
  EXPECT_EQ(s.scale().scalar_type(), torch::kFloat32);
}

TEST(LossScalerTest, TheLossIsScaledInFloat32) {
  const LossScaler s(torch::kCPU);
  const torch::Tensor scaled = s.scale_loss(torch::full({}, 1.5, torch::kHalf));
  EXPECT_EQ(scaled.scalar_type(), torch::kFloat32);
  EXPECT_EQ(scaled.item<float>(), 1.5f * 65536.0f);
}

TEST(LossScalerTest, UnscaleDividesEveryGradientAndFlagsInfAndNan) {
  LossScaler s(torch::kCPU);
  auto g = gradients(torch::kCPU, 2.0f * 65536.0f);
  s.unscale(g);
  EXPECT_EQ(s.found_inf().item<float>(), 0.0f);
  EXPECT_TRUE(g[0].equal(torch::full({3, 4}, 2.0f)));
  EXPECT_TRUE(g[1].equal(torch::full({5}, 2.0f)));
  EXPECT_FALSE(g[2].defined());
  for (const float bad :
       {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::quiet_NaN()}) {
    auto h = gradients(torch::kCPU, 65536.0f);
    h[1][3] = bad;
    s.unscale(h);
    EXPECT_EQ(s.found_inf().item<float>(), 1.0f) << bad;
    EXPECT_TRUE(h[0].equal(torch::ones({3, 4}))) << "every gradient is unscaled, as GradScaler's";
  }
  auto fine = gradients(torch::kCPU, 65536.0f);
  s.unscale(fine);  // found_inf starts again from 0 at each unscale
  EXPECT_EQ(s.found_inf().item<float>(), 0.0f);
}

TEST(LossScalerTest, TheScaleFollowsGradScalersRule) {
  LossScaler::Options o;
  o.init_scale = 8.0;
  o.growth_interval = 3;
  LossScaler s(torch::kCPU, o);
  const float inf = std::numeric_limits<float>::infinity();
  // Each step: its gradients (finite or not), then the state after update().
  const std::vector<std::pair<float, State>> steps = {
      {1.0f, {8.0, 1, 0}}, {1.0f, {8.0, 2, 0}}, {1.0f, {16.0, 0, 0}},  // grows at the interval
      {inf, {8.0, 0, 1}},                                              // backs off, skipped
      {1.0f, {8.0, 1, 1}}, {inf, {4.0, 0, 2}},  {inf, {2.0, 0, 3}},    // the tracker restarts
      {1.0f, {2.0, 1, 3}}, {1.0f, {2.0, 2, 3}}, {1.0f, {4.0, 0, 3}},
  };
  for (std::size_t k = 0; k < steps.size(); ++k) {
    auto g = gradients(torch::kCPU, 1.0f);
    g[0][0][0] = steps[k].first;
    s.unscale(g);
    s.update();
    const State got = s.state();
    EXPECT_TRUE(same_state(got, steps[k].second))
        << "step " << k << ": scale " << got.scale << ", tracker " << got.growth_tracker
        << ", skipped " << got.skipped_steps;
  }
}

TEST(LossScalerTest, SkippedStepsAreTheFlagsSet) {
  const auto flags = torch::tensor({0.0f, 1.0f, 0.0f, 1.0f, 1.0f});
  EXPECT_EQ(skipped_steps_of(flags, 10), (std::vector<std::int64_t>{11, 13, 14}));
  EXPECT_EQ(skipped_steps_of(flags.narrow(0, 0, 1), 0), std::vector<std::int64_t>{});
  EXPECT_EQ(skipped_steps_of(torch::zeros({0}), 5), std::vector<std::int64_t>{});
  EXPECT_EQ(skipped_steps_of(torch::tensor({1, 0, 2}, torch::kInt64), 0),
            (std::vector<std::int64_t>{0, 2}));
}

// The trainer's way: found_inf() copied into a buffer after each step's update(), read once at
// the end, names the steps the scaler counted as skipped.
TEST(LossScalerTest, FoundInfCopiedAfterEachStepNamesTheSkippedSteps) {
  LossScaler s(torch::kCPU);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> values = {inf, 1.0f, nan, 1.0f, 1.0f, inf, 1.0f};
  const torch::Tensor found =
      torch::zeros({static_cast<std::int64_t>(values.size())}, s.found_inf().options());
  for (std::size_t k = 0; k < values.size(); ++k) {
    auto g = gradients(torch::kCPU, 1.0f);
    g[1][2] = values[k];
    s.unscale(g);
    s.update();
    found.narrow(0, static_cast<std::int64_t>(k), 1).copy_(s.found_inf());
  }
  const std::vector<std::int64_t> skipped = skipped_steps_of(found, 100);
  EXPECT_EQ(skipped, (std::vector<std::int64_t>{100, 102, 105}));
  EXPECT_EQ(static_cast<std::int64_t>(skipped.size()), s.state().skipped_steps);
}

TEST(LossScalerTest, TheScaleDoesNotGrowPastFloat32) {
  LossScaler::Options o;
  o.init_scale = 3e38;
  o.growth_interval = 1;
  LossScaler s(torch::kCPU, o);
  auto g = gradients(torch::kCPU, 1.0f);
  s.unscale(g);
  s.update();
  EXPECT_EQ(s.state().scale, static_cast<double>(3e38f));
  EXPECT_EQ(s.state().growth_tracker, 0);
}

TEST(LossScalerTest, BadOptionsAndSavedStatesAreRefused) {
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& change : std::vector<std::function<void(LossScaler::Options&)>>{
           [](auto& o) { o.init_scale = 0; }, [&](auto& o) { o.init_scale = inf; },
           [](auto& o) { o.growth_factor = 1.0; }, [](auto& o) { o.backoff_factor = 1.0; },
           [](auto& o) { o.backoff_factor = 0; }, [](auto& o) { o.growth_interval = 0; }}) {
    LossScaler::Options o;
    change(o);
    EXPECT_THROW(LossScaler(torch::kCPU, o), UsageError);
  }
  LossScaler s(torch::kCPU);
  for (const State& bad : {State{std::nan(""), 0, 0}, State{-1.0, 0, 0}, State{1024.0, -1, 0},
                           State{1024.0, 2000, 0}, State{1024.0, 0, -3}}) {
    EXPECT_THROW(s.load(bad), UsageError);
  }
  EXPECT_TRUE(same_state(s.state(), {65536.0, 0, 0})) << "a refused state changes nothing";
}

TEST(LossScalerTest, ALoadedStateGoesOnWhereItStopped) {
  LossScaler::Options o;
  o.growth_interval = 6;
  LossScaler s(torch::kCPU, o);
  s.load({1024.0, 5, 7});
  EXPECT_TRUE(same_state(s.state(), {1024.0, 5, 7}));
  auto g = gradients(torch::kCPU, 1.0f);
  s.unscale(g);
  s.update();
  EXPECT_TRUE(same_state(s.state(), {2048.0, 0, 7}));
}

// --- CUDA ----------------------------------------------------------------------------------------

class LossScalerCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  }
  torch::Device gpu_{torch::kCUDA, 0};
};

// PyTorch's kernels and the tensor operations give the same gradients, flags and scales.
TEST_F(LossScalerCudaTest, PyTorchsKernelsAreTheTensorOperations) {
  torch::manual_seed(3);
  const auto o = torch::TensorOptions().device(gpu_);
  for (int round = 0; round < 3; ++round) {
    std::vector<torch::Tensor> a = {torch::randn({64, 33}, o) * 1e4, torch::randn({1000}, o)};
    if (round == 1) a[1][17] = std::numeric_limits<float>::infinity();
    if (round == 2) a[0][5][2] = std::numeric_limits<float>::quiet_NaN();
    std::vector<torch::Tensor> b = {a[0].clone(), a[1].clone()};
    const torch::Tensor inv = torch::full({1}, 1.0 / 3.0, o);
    torch::Tensor fa = torch::zeros({1}, o), fb = torch::zeros({1}, o);
    at::_amp_foreach_non_finite_check_and_unscale_(a, fa, inv);
    detail::unscale_with_tensor_ops(b, fb, inv);
    EXPECT_EQ(fa.item<float>(), fb.item<float>()) << round;
    EXPECT_EQ(fa.item<float>(), round == 0 ? 0.0f : 1.0f);
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(a[i].equal(b[i]) || round == 2) << round << " tensor " << i;
      EXPECT_TRUE(at::allclose(a[i], b[i], 0, 0, /*equal_nan=*/true)) << round << " tensor " << i;
    }
  }
  for (const float found : {0.0f, 1.0f, 0.0f, 0.0f}) {
    torch::Tensor sa = torch::full({1}, 4.0f, o), sb = sa.clone();
    torch::Tensor ta = torch::full({1}, 2, o.dtype(torch::kInt32)), tb = ta.clone();
    const torch::Tensor f = torch::full({1}, found, o);
    at::_amp_update_scale_(sa, ta, f, 2.0, 0.5, 3);
    detail::update_with_tensor_ops(sb, tb, f, 2.0, 0.5, 3);
    EXPECT_TRUE(sa.equal(sb)) << found;
    EXPECT_TRUE(ta.equal(tb)) << found;
  }
}

// unscale() and update() captured once in a CUDA graph: each replay scales as an eager step would,
// from the gradients written before it, with no host read in between.
TEST_F(LossScalerCudaTest, AGraphReplaysTheScalingOfEveryStep) {
#if defined(WORKLOAD_TORCH_CUDA) && TORCH_VERSION_MAJOR >= 2
  use_cuda_device(0, false);
  StepStream stream(true);  // captured on a stream other than the legacy default one
  LossScaler::Options opts;
  opts.init_scale = 8.0;
  opts.growth_interval = 2;
  LossScaler s(gpu_, opts);
  std::vector<torch::Tensor> g = gradients(gpu_, 8.0f);
  g.pop_back();
  s.unscale(g);  // eagerly first, as the warm-up does
  s.update();
  s.load({8.0, 0, 0});
  for (auto& t : g) t.fill_(8.0f);
  device_synchronize();
  at::cuda::CUDAGraph graph;
  graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
  s.unscale(g);
  s.update();
  graph.capture_end();
  const float inf = std::numeric_limits<float>::infinity();
  // The gradients as the step's backward would leave them (scaled by the scale of that step).
  const std::vector<std::pair<float, State>> replays = {{8.0f * 8.0f, {8.0, 1, 0}},
                                                        {8.0f * 8.0f, {16.0, 0, 0}},
                                                        {inf, {8.0, 0, 1}},
                                                        {8.0f * 8.0f, {8.0, 1, 1}}};
  for (std::size_t k = 0; k < replays.size(); ++k) {
    for (auto& t : g) t.fill_(replays[k].first);
    graph.replay();
    device_synchronize();
    const State got = s.state();
    EXPECT_TRUE(same_state(got, replays[k].second))
        << "replay " << k << ": scale " << got.scale << ", tracker " << got.growth_tracker
        << ", skipped " << got.skipped_steps;
    if (k != 2) {
      EXPECT_TRUE(g[0].equal(torch::full({3, 4}, 8.0f, g[0].options()))) << "replay " << k;
    }
  }
#else
  GTEST_SKIP() << "CUDA graphs need a CUDA LibTorch 2.x";
#endif
}

}  // namespace
}  // namespace workload
