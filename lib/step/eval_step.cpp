// The evaluation's step (lib/step/eval_step.h).
#include "lib/step/eval_step.h"

#include <torch/nn/functional/loss.h>

#include <algorithm>

#include "lib/device/autocast_guard.h"
#include "lib/step/autocast_precision.h"

namespace workload {

EvalStep::EvalStep(ResNet50 model, const TrainConfig& config, torch::Device device)
    : model_(std::move(model)),
      autocast_(autocast_type(config.precision)),
      normalize_(device),
      totals_(torch::zeros({4}, torch::TensorOptions().dtype(torch::kFloat64).device(device))) {}

void EvalStep::begin() { totals_.zero_(); }

void EvalStep::forward(const StepInputs& in) {
  torch::NoGradGuard no_grad;
  torch::Tensor logits;
  {
    AutocastGuard autocast(autocast_.has_value(), c10::DeviceType::CUDA,
                           autocast_.value_or(at::kBFloat16));
    logits = model_->forward(in.images);
  }
  logits = logits.to(torch::kFloat32);
  const torch::Tensor loss = torch::nn::functional::cross_entropy(
      logits, in.labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
  const std::int64_t k = std::min<std::int64_t>(5, logits.size(1));
  const torch::Tensor top = std::get<1>(logits.topk(k, /*dim=*/1));
  const torch::Tensor hit = top.eq(in.labels.unsqueeze(1));
  // A label below 0 marks an image left out (one the loader could not read): no image, no hit, and
  // cross_entropy's ignore_index (-100) leaves it out of the loss.
  const torch::Tensor counts = torch::stack(
      {in.labels.ge(0).sum().to(torch::kFloat64), hit.select(1, 0).sum().to(torch::kFloat64),
       hit.any(1).sum().to(torch::kFloat64), loss.to(torch::kFloat64)});
  totals_.add_(counts);
}

EvalCounts EvalStep::read(const torch::Tensor& totals) {
  const torch::Tensor host = totals.to(torch::kCPU);
  const double* v = host.data_ptr<double>();
  EvalCounts c;
  c.images = static_cast<std::int64_t>(v[0]);
  c.top1 = static_cast<std::int64_t>(v[1]);
  c.top5 = static_cast<std::int64_t>(v[2]);
  c.loss_sum = v[3];
  return c;
}

}  // namespace workload
