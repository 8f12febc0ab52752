// The eager training step: normalize, forward, zero_grad, backward and optimizer_step, launched
// from the host every step, with DDP's hooks in a distributed run.
#pragma once

#include <vector>

#include "lib/step/device_normalize.h"
#include "lib/step/step_executor.h"

namespace workload {

/// Runs eager_plan(config)'s phases: normalize (uint8 batches: x * scale + bias per channel, on
/// the device, strides kept), forward with the cross-entropy loss (--label-smoothing; bf16
/// autocast with --precision bf16, without autograd in --mode forward, per-layer NVTX ranges with
/// --nvtx-detail layers, DDP's buffer broadcast and bucket bookkeeping first), zero_grad
/// (gradients set to none), backward and the optimizer's step. One thread.
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
  bool train_;
  bool bf16_;
  bool layer_ranges_;
  double label_smoothing_;
  std::vector<torch::Tensor> params_;  // model_->parameters(), gathered once for zero_grad
  DeviceNormalize normalize_;          // uint8 batches -> normalised float32
  torch::Tensor loss_;
};

}  // namespace workload
