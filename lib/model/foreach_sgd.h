// SGD with momentum and weight decay on multi-tensor (_foreach_) kernels, as PyTorch's default.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "lib/model/lr_schedule.h"

namespace workload {

/// SGD equal to `torch.optim.SGD(params, lr, momentum, weight_decay)` with its default
/// `foreach=True` implementation on CUDA: weight decay, the momentum update and the parameter
/// update each run as one multi-tensor operation over all parameters (a handful of kernels per
/// step instead of several per parameter, as LibTorch's per-parameter `torch::optim::SGD` does).
/// The arithmetic, and so every result, is the same as `torch::optim::SGD` (no dampening, no
/// Nesterov): buf = grad on the first step, then buf = momentum * buf + grad; p -= lr * buf.
///
/// Weight decay is added to the gradients in place: after step() a parameter's gradient holds
/// grad + weight_decay * p (the next zero_grad clears it; nothing new is allocated for it).
///
/// Where the LR comes from (LrSource):
/// - kHost: a scalar of the kernels, step k's schedule.lr_at(k) from the host. The same kernels
///   as the article's constant LR whatever the schedule: a schedule changes values, not kernels.
///   A CUDA graph would replay the value it captured, so a graph needs kDevice.
/// - kDevice (a schedule that is not constant): a float32 table of every step's LR, the negated
///   schedule.lr_at(k) for k < total_steps, lives on the parameters' device beside a step counter
///   that each step() reads and advances there, and the update is `torch.optim.SGD`'s with a
///   tensor LR: buf * (-lr[k]) (`_foreach_mul`), then added to the parameters. step() launches the
///   same kernels every time and needs nothing from the host between steps: a graph that captured
///   one step replays the whole schedule. Steps past the table's end keep its last LR.
/// The two round differently (one multiply-add against a product then a sum): within float
/// rounding of each other, not bit for bit.
///
/// Not thread-safe; use from the training thread.
class ForeachSgd {
 public:
  enum class LrSource { kHost, kDevice };

  /// The same `lr` every step, as a scalar of the kernels.
  ForeachSgd(std::vector<torch::Tensor> params, double lr, double momentum, double weight_decay);
  /// Step k at schedule.lr_at(k), read as `source` says (a constant schedule is always the scalar).
  ForeachSgd(std::vector<torch::Tensor> params, const LrSchedule& schedule, double momentum,
             double weight_decay, LrSource source = LrSource::kHost);

  /// Updates every parameter that has a gradient. Parameters without one are skipped, and a
  /// parameter's momentum buffer is created the first time it has a gradient. Advances the
  /// schedule's step (kDevice: on the device, where nothing waits for it).
  void step();

  /// step(), unless found_inf (float32 [1], a LossScaler's) is 1: then no parameter, momentum
  /// buffer or gradient changes, and only the schedule's step advances (as a PyTorch LR scheduler
  /// steps whether or not GradScaler skipped the optimizer). On CUDA with LibTorch 2.4 or later
  /// this is PyTorch's fused SGD (`_fused_sgd_` with `found_inf`): one multi-tensor kernel that
  /// reads the flag on the device, so a CUDA graph replays the skip. Its arithmetic is the same
  /// sums in registers; the weight decay does not go into the gradients. There every momentum
  /// buffer is made (zero) at the first call, so a skipped first step leaves them as they were.
  /// Elsewhere the flag is read on the host (a sync) and step() runs or does not.
  /// \throws std::invalid_argument when found_inf is not a float32 tensor of one value.
  void step(const torch::Tensor& found_inf);
  /// Whether step(found_inf) reads the flag on the device for these parameters (no host sync).
  bool skips_on_device() const;

  /// What a checkpoint keeps of the optimizer: each parameter's momentum buffer (undefined before
  /// its first update) and the steps taken, the schedule's position.
  struct State {
    std::vector<torch::Tensor> momentum;
    std::int64_t steps = 0;
  };
  /// The state as it stands (the buffers themselves, not copies: save them before the next step).
  State state() const { return {momentum_, steps_}; }
  /// Continues from `state`: the buffers copied into ones laid out as their parameters, the
  /// schedule's next step `state.steps` (kDevice: the device counter set, clamped to the table).
  /// 	hrows std::invalid_argument when the buffers do not match the parameters (count, shape).
  void load_state(const State& state);

  const std::vector<torch::Tensor>& parameters() const { return params_; }
  /// Whether the LR is read on the device (a schedule that is not constant).
  bool lr_on_device() const { return lr_table_.defined(); }

 private:
  /// p += buf * lr_table_[step_], then step_ = min(step_ + 1, last).
  void update_from_table(const std::vector<torch::Tensor>& params,
                         const std::vector<torch::Tensor>& updates);
  /// The parameters with a gradient, their gradients and their indices.
  void with_gradients(std::vector<torch::Tensor>& params, std::vector<torch::Tensor>& grads,
                      std::vector<std::size_t>& index) const;
  /// step(found_inf) on the fused kernel (skips_on_device()).
  void fused_step(const torch::Tensor& found_inf);
  /// kDevice: this step's LR as the fused kernel takes it (positive, float32, 0-dim), the device
  /// counter moved on.
  torch::Tensor device_lr();
  // The momentum buffers of the parameters at index, moved on by grads (made from the first
  // gradient where a buffer is missing): the updates a step applies.
  std::vector<torch::Tensor> with_momentum(const std::vector<std::size_t>& index,
                                           const std::vector<torch::Tensor>& grads);

  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> momentum_;  // one per parameter; undefined until its first step
  double lr_;
  double momentum_factor_;
  double weight_decay_;
  std::optional<LrSchedule> schedule_;  // kHost with a schedule that is not constant
  std::int64_t steps_ = 0;              // step() calls: schedule_'s next step
  torch::Tensor lr_table_;  // float32 [total_steps]: -lr of each step; undefined: the scalar lr_
  torch::Tensor step_;      // int64 [1], on lr_table_'s device: the next step's index
  std::int64_t last_step_ = 0;
};

}  // namespace workload
