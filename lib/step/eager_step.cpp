// The eager training step (lib/step/eager_step.h).
#include "lib/step/eager_step.h"

#include <torch/nn/functional/loss.h>

#include <optional>
#include <stdexcept>

#include "lib/device/autocast_guard.h"
#include "lib/distributed/data_parallel.h"
#include "lib/instrument/nvtx.h"
#include "lib/step/autocast_precision.h"

namespace workload {

EagerStep::EagerStep(const StepContext& ctx)
    : plan_(eager_plan(ctx.config)),
      model_(ctx.model),
      optimizer_(ctx.optimizer),
      ddp_(ctx.ddp),
      scaler_(ctx.scaler),
      train_(ctx.config.mode == RunMode::kTrain),
      autocast_(autocast_type(ctx.config.precision)),
      layer_ranges_(ctx.config.nvtx_detail == NvtxDetail::kLayers),
      label_smoothing_(ctx.config.label_smoothing),
      params_(model_->parameters()),
      normalize_(ctx.device) {}

void EagerStep::run(StepPhase phase, StepInputs& in) {
  switch (phase) {
    case StepPhase::kNormalize:
      // Converts on the device; the NHWC strides are kept (memory format preserved).
      in.images = normalize_(in.images);
      return;
    case StepPhase::kForward:
      loss_ = forward_and_loss(in.images, in.labels);
      return;
    case StepPhase::kZeroGrad:
      // optimizer.zero_grad(set_to_none=True), written out: LibTorch 1.13's zero_grad() zeroes.
      for (auto& p : params_) p.mutable_grad().reset();
      return;
    case StepPhase::kBackward:
      if (scaler_ != nullptr) {
        scaler_->scale_loss(loss_).backward();
      } else {
        loss_.backward();
      }
      return;
    case StepPhase::kOptimizerStep:
      if (scaler_ != nullptr) {
        grads_.clear();
        for (const auto& p : params_) grads_.push_back(p.grad());  // undefined ones left out
        scaler_->unscale(grads_);
        optimizer_.step(scaler_->found_inf());
        scaler_->update();
      } else {
        optimizer_.step();
      }
      return;
    case StepPhase::kGraphReplay:
      break;
  }
  throw std::logic_error(std::string("EagerStep: no phase ") + range_name(phase));
}

torch::Tensor EagerStep::forward_and_loss(const torch::Tensor& images,
                                          const torch::Tensor& labels) {
  AutocastGuard autocast(autocast_.has_value(), c10::DeviceType::CUDA,
                         autocast_.value_or(at::kBFloat16));
  std::optional<torch::NoGradGuard> no_grad;
  if (!train_) no_grad.emplace();
  // Under DDP the buffers' broadcast and the reducer's bookkeeping belong to forward, as in
  // PyTorch's DistributedDataParallel.forward.
  if (ddp_) ddp_->before_forward();
  const torch::Tensor output =
      !layer_ranges_ ? model_->forward(images)
                     : model_->forward_with_hook(images, [](const char* name, bool enter) {
                         if (enter) {
                           nvtx::push(name);
                         } else {
                           nvtx::pop();
                         }
                       });
  if (ddp_ && train_) ddp_->before_backward();
  // label_smoothing 0 is the options' default: the article's loss, the same call.
  return torch::nn::functional::cross_entropy(
      output, labels,
      torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(label_smoothing_));
}

}  // namespace workload
