// The eager training step: normalize, forward, zero_grad, backward and optimizer_step, launched
// from the host every step, with DDP's hooks in a distributed run.
#pragma once

#include <optional>
#include <vector>

#include "lib/step/device_normalize.h"
#include "lib/step/step_executor.h"

namespace workload {

/// Runs eager_plan(config)'s phases: normalize (uint8 batches: x * scale + bias per channel, on
/// the device, strides kept), forward with the cross-entropy loss (--label-smoothing; bf16 or fp16
/// autocast with --precision, without autograd in --mode forward, per-layer NVTX ranges with
/// --nvtx-detail layers, DDP's buffer broadcast and bucket bookkeeping first), zero_grad
/// (gradients set to none), backward and the optimizer's step. With a LossScaler (fp16) backward
/// starts from the scaled loss, and optimizer_step unscales the gradients, steps unless one is not
/// finite (decided on the device) and updates the scale: nothing waits on the host, so a CUDA
/// graph of the step replays the scaling too. One thread.
class EagerStep final : public StepExecutor {
 public:
  explicit EagerStep(const StepContext& ctx);

  const StepPlan& plan() const override { return plan_; }
  void run(StepPhase phase, StepInputs& inputs) override;
  torch::Tensor loss() const override { return loss_; }

 private:
  torch::Tensor forward_and_loss(const torch::Tensor& images, const torch::Tensor& labels);

  StepPlan plan_;
  ResNet50 model_;
  ForeachSgd& optimizer_;
  DataParallel* ddp_;
  LossScaler* scaler_;
  bool train_;
  std::optional<at::ScalarType> autocast_;  // the dtype autocast casts to; none: fp32
  bool layer_ranges_;
  double label_smoothing_;
  std::vector<torch::Tensor> params_;  // model_->parameters(), gathered once for zero_grad
  std::vector<torch::Tensor> grads_;   // scaler_: their gradients, gathered each step to unscale
  DeviceNormalize normalize_;          // uint8 batches -> normalised float32
  torch::Tensor loss_;
};

}  // namespace workload
