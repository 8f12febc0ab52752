// Tests for EvalStep: the counts it keeps on the device against the model's own logits.
#include "lib/step/eval_step.h"

#include <gtest/gtest.h>

#include <torch/nn/functional/loss.h>

namespace workload {
namespace {

struct Batch {
  StepInputs in;
  torch::Tensor logits;  // the eval-mode model's, computed apart
};

// `n` random images of 32 px and labels of `classes`, with the logits the model gives them.
Batch batch_of(ResNet50& model, std::int64_t n, std::int64_t classes, int seed) {
  torch::manual_seed(seed);
  Batch b;
  b.in.images = torch::randn({n, 3, 32, 32}).contiguous(torch::MemoryFormat::ChannelsLast);
  b.in.labels = torch::randint(classes, {n}, torch::kInt64);
  torch::NoGradGuard no_grad;
  b.logits = model->forward(b.in.images);
  return b;
}

TEST(EvalStep, CountsHitsAndSumsTheLossOverBatches) {
  for (const std::int64_t classes : {3, 7}) {
    torch::manual_seed(1);
    ResNet50 model(classes);
    to_channels_last(*model);
    model->eval();
    TrainConfig config;
    config.device = Device::kCpu;
    EvalStep step(model, config, torch::kCPU);
    const Batch a = batch_of(model, 5, classes, 2),
                b = batch_of(model, 3, classes, 3);  // one short
    step.begin();
    step.forward(a.in);
    step.forward(b.in);
    const EvalCounts c = EvalStep::read(step.totals());
    EXPECT_EQ(c.images, 8);
    std::int64_t top1 = 0, top5 = 0;
    double loss = 0;
    for (const Batch* x : {&a, &b}) {
      top1 += x->logits.argmax(1).eq(x->in.labels).sum().item<std::int64_t>();
      const auto top = std::get<1>(x->logits.topk(std::min<std::int64_t>(5, classes), 1));
      top5 += top.eq(x->in.labels.unsqueeze(1)).any(1).sum().item<std::int64_t>();
      loss += torch::nn::functional::cross_entropy(
                  x->logits, x->in.labels,
                  torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                  .item<double>();
    }
    EXPECT_EQ(c.top1, top1) << classes << " classes";
    EXPECT_EQ(c.top5, top5) << classes << " classes";
    if (classes <= 5) {
      EXPECT_EQ(c.top5, 8) << "every class is in the top 5";
    }
    EXPECT_NEAR(c.loss_sum, loss, 1e-4 * std::abs(loss)) << classes << " classes";
    // begin() starts a new pass.
    step.begin();
    step.forward(b.in);
    EXPECT_EQ(EvalStep::read(step.totals()).images, 3);
  }
}

TEST(EvalStep, NormalizeIsTheTrainingStepsNormalisation) {
  TrainConfig config;
  config.device = Device::kCpu;
  ResNet50 model(3);
  EvalStep step(model, config, torch::kCPU);
  StepInputs in;
  in.images = torch::full({1, 3, 2, 2}, 255, torch::kUInt8);
  step.normalize(in);
  ASSERT_EQ(in.images.scalar_type(), torch::kFloat32);
  // (1 - mean) / std for the red channel: (1 - 0.485) / 0.229.
  EXPECT_NEAR(in.images[0][0][0][0].item<float>(), (1 - 0.485f) / 0.229f, 1e-5);
}

}  // namespace
}  // namespace workload
