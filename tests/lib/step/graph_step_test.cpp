// Tests for GraphStep on its own (no Trainer, no loader): eager until prepare(), then one captured
// graph replayed on the batches fed into its static inputs, training as the eager step does.
#include "lib/step/graph_step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "lib/device/cuda_device.h"

namespace workload {
namespace {

/// A small ResNet-50 step (3 classes, 32 px, batch 4) run by an executor of `config`.
struct Bench {
  Bench(TrainConfig c, torch::Device device) : config(std::move(c)) {
    if (config.precision == Precision::kFp16) {
      // Below GradScaler's 2^16, whose first steps may overflow: both replicas take every step.
      LossScaler::Options o;
      o.init_scale = 128.0;
      scaler = std::make_unique<LossScaler>(device, o);
    }
    torch::manual_seed(11);
    model = ResNet50(3);
    model->to(device);
    to_channels_last(*model);
    model->train();
    optimizer = std::make_unique<ForeachSgd>(model->parameters(), 0.001, 0.9, 1e-4);
    const StepContext ctx{config, model, *optimizer, nullptr, scaler.get(), device, notices};
    auto eager = std::make_unique<EagerStep>(ctx);
    if (config.cuda_graph) {
      step = std::make_unique<GraphStep>(ctx, std::move(eager));
    } else {
      step = std::move(eager);
    }
  }
  /// One step as the Trainer runs it: feed, then the plan's phases.
  void run(StepInputs in) {
    step->feed(in);
    run_phases(*step, step->plan().load, in, nullptr);
    run_phases(*step, step->plan().device, in, nullptr);
  }
  TrainConfig config;
  ResNet50 model{nullptr};
  std::unique_ptr<ForeachSgd> optimizer;
  std::unique_ptr<LossScaler> scaler;  // --precision fp16
  std::vector<std::string> notices;
  std::unique_ptr<StepExecutor> step;
};

TrainConfig graph_config() {
  TrainConfig c;
  c.synthetic = true;
  c.device = Device::kCuda;
  c.cuda_graph = true;
  c.loader.batch_size = 4;
  c.loader.transform.image_size = 32;
  return c;
}

StepInputs batch(int seed, torch::Device device) {
  torch::manual_seed(1000 + seed);
  StepInputs in;
  in.images = torch::randn({4, 32, 32, 3}).permute({0, 3, 1, 2}).to(device);
  in.labels = torch::randint(3, {4}, torch::kInt64).to(device);
  return in;
}

TEST(GraphStepTest, BeforeItsCaptureItIsTheEagerStep) {
  TrainConfig c = graph_config();
  c.device = Device::kCpu;  // nothing here needs a device
  Bench b(c, torch::kCPU);
  EXPECT_TRUE(b.step->has_preparation());
  EXPECT_EQ(b.step->plan().device, eager_plan(c).device);
  StepInputs in = batch(0, torch::kCPU);
  b.run(in);  // the warm-up runs eagerly
  ASSERT_TRUE(b.step->loss().defined());
  EXPECT_TRUE(std::isfinite(b.step->loss().item<float>()));
  EXPECT_THROW(b.step->run(StepPhase::kGraphReplay, in), std::logic_error);  // nothing captured
}

class GraphStepGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "needs a CUDA device";
    stream_.emplace(true);  // a graph is captured on a stream other than the legacy default one
  }
  std::optional<StepStream> stream_;
  torch::Device gpu_{torch::kCUDA, 0};
};

// Two replicas from one seed, one eager and one graph, fed the same batches: the same losses step
// by step, within run-to-run accumulation noise, and the same weights at the end.
TEST_F(GraphStepGpuTest, ReplaysTrainAsTheEagerStepOnTheBatchesFed) {
  TrainConfig eager_config = graph_config();
  eager_config.cuda_graph = false;
  Bench eager(eager_config, gpu_);
  Bench graph(graph_config(), gpu_);
  for (int i = 0; i < 2; ++i) {  // warm-up, eager in both
    eager.run(batch(i, gpu_));
    graph.run(batch(i, gpu_));
  }
  const float warmup_loss = graph.step->loss().item<float>();
  const Preparation result = graph.step->prepare();
  ASSERT_TRUE(result.graph_capture_ms.has_value());
  EXPECT_GT(*result.graph_capture_ms, 0.0);
  EXPECT_EQ(graph.step->plan().device, std::vector<StepPhase>{StepPhase::kGraphReplay});
  EXPECT_TRUE(graph.step->plan().load.empty());
  // The capture ran nothing: the loss is the warm-up's until a replay writes the graph's.
  EXPECT_EQ(graph.step->loss().item<float>(), warmup_loss);
  if (result.graph_memset_kernels < 0) {
    EXPECT_FALSE(graph.notices.empty()) << "a build that cannot rewrite says so";
  } else {
    EXPECT_GT(result.graph_memset_kernels, 0);  // cuDNN's counters, rewritten
  }
  for (int i = 2; i < 6; ++i) {
    eager.run(batch(i, gpu_));
    graph.run(batch(i, gpu_));
    const float e = eager.step->loss().item<float>(), g = graph.step->loss().item<float>();
    EXPECT_NEAR(g, e, 1e-3 * std::max(1.0f, std::abs(e))) << "step " << i;
  }
  const auto pe = eager.model->parameters(), pg = graph.model->parameters();
  for (std::size_t i = 0; i < pe.size(); ++i) {
    EXPECT_TRUE(torch::allclose(pg[i], pe[i], 1e-3, 1e-4)) << "parameter " << i;
  }
}

// fp16: the graph replays the loss scaling as the eager step runs it (the same losses and scale),
// and a replay whose gradients overflow skips the optimizer on the device: every weight stays and
// the scale halves, with nothing read on the host in between.
TEST_F(GraphStepGpuTest, Fp16ReplaysTheLossScalingAndSkipsAnOverflowingStep) {
  TrainConfig c = graph_config();
  c.precision = Precision::kFp16;
  TrainConfig eager_config = c;
  eager_config.cuda_graph = false;
  Bench eager(eager_config, gpu_);
  Bench graph(c, gpu_);
  if (!graph.optimizer->skips_on_device()) GTEST_SKIP() << "this LibTorch has no fused SGD";
  for (int i = 0; i < 2; ++i) {
    eager.run(batch(i, gpu_));
    graph.run(batch(i, gpu_));
  }
  graph.step->prepare();
  for (int i = 2; i < 5; ++i) {
    eager.run(batch(i, gpu_));
    graph.run(batch(i, gpu_));
    const float e = eager.step->loss().item<float>(), g = graph.step->loss().item<float>();
    EXPECT_NEAR(g, e, 1e-2 * std::max(1.0f, std::abs(e))) << "step " << i;
  }
  const LossScaler::State se = eager.scaler->state(), sg = graph.scaler->state();
  EXPECT_EQ(sg.scale, se.scale);
  EXPECT_EQ(sg.growth_tracker, se.growth_tracker);
  EXPECT_EQ(sg.skipped_steps, se.skipped_steps);
  // An overflowing scale, written in place: the next replay skips.
  graph.scaler->load({3e38, sg.growth_tracker, sg.skipped_steps});
  std::vector<torch::Tensor> before;
  for (const auto& p : graph.model->parameters()) before.push_back(p.detach().clone());
  graph.run(batch(5, gpu_));
  const auto after = graph.model->parameters();
  for (std::size_t i = 0; i < before.size(); ++i) {
    ASSERT_TRUE(after[i].equal(before[i])) << "parameter " << i;
  }
  const LossScaler::State skipped = graph.scaler->state();
  EXPECT_EQ(skipped.skipped_steps, sg.skipped_steps + 1);
  EXPECT_EQ(skipped.scale, static_cast<double>(static_cast<float>(1.5e38)));
  graph.run(batch(6, gpu_));  // and the next one, at the halved scale, still overflows or steps
  EXPECT_TRUE(std::isfinite(graph.step->loss().item<float>()));
}

// A source whose batch is the same tensors every step (SyntheticInput's) is read by the graph in
// place; any other batch is copied into the graph's own static inputs, left as they were fed.
TEST_F(GraphStepGpuTest, PersistentInputsAreReadInPlaceAndOtherBatchesCopied) {
  Bench in_place(graph_config(), gpu_), copied(graph_config(), gpu_);
  StepInputs fixed = batch(0, gpu_);
  fixed.persistent = true;
  in_place.run(fixed);
  copied.run(batch(0, gpu_));
  in_place.step->prepare();
  copied.step->prepare();
  const StepInputs b0 = batch(0, gpu_), b1 = batch(1, gpu_);
  const torch::Tensor b1_images = b1.images.clone();
  in_place.run(fixed);
  copied.run(b0);
  EXPECT_NEAR(in_place.step->loss().item<float>(), copied.step->loss().item<float>(), 1e-3);
  // New contents in the persistent tensors: the next replay reads them.
  fixed.images.copy_(b1.images);
  fixed.labels.copy_(b1.labels);
  in_place.run(fixed);
  copied.run(b1);
  EXPECT_NEAR(in_place.step->loss().item<float>(), copied.step->loss().item<float>(), 1e-3);
  EXPECT_TRUE(b1.images.equal(b1_images));  // a fed batch is read, not written
}

TEST_F(GraphStepGpuTest, ABatchOfAnotherShapeIsRefusedNamingTheFlag) {
  Bench graph(graph_config(), gpu_);
  graph.run(batch(0, gpu_));
  graph.step->prepare();
  StepInputs small = batch(1, gpu_);
  small.images = small.images.narrow(0, 0, 3);
  small.labels = small.labels.narrow(0, 0, 3);
  try {
    graph.step->feed(small);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--cuda-graph: a batch of images [3, 3, 32, 32]"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace workload
