// Dynamic loss scaling for fp16 training, as torch.amp.GradScaler does it, with every piece of
// its state on the gradients' device (issue 45).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace workload {

/// Dynamic loss scaling equal to `torch.amp.GradScaler()` with its defaults: the loss is
/// multiplied by a scale (2^16 at first) before backward; the gradients are checked for inf and
/// NaN and divided by the scale before the optimizer's step; a step with a non-finite gradient
/// halves the scale, and 2000 steps in a row without one double it (when the doubled scale is
/// finite).
///
/// Unlike GradScaler, nothing of it waits on the host between steps: the scale, the growth
/// tracker, the found-inf flag and the count of skipped steps stay on the device, so a CUDA graph
/// that captured one step replays the scaling of every step. found_inf() is what an optimizer
/// reads to skip its update on the device. On CUDA unscale() and update() are PyTorch's own kernels
/// (_amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_); on other devices, the same
/// arithmetic in tensor operations (LibTorch has no CPU kernels for them before 2.x).
///
/// Not thread-safe; use from the training thread.
class LossScaler {
 public:
  struct Options {
    double init_scale = 65536.0;  ///< 2^16
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    std::int64_t growth_interval = 2000;  ///< steps in a row without inf or NaN before a growth
  };
  /// \throws UsageError naming the option when a factor or the interval is out of range.
  explicit LossScaler(torch::Device device, Options options);
  explicit LossScaler(torch::Device device) : LossScaler(device, Options{}) {}

  /// loss * scale, in float32: what backward() starts from.
  torch::Tensor scale_loss(const torch::Tensor& loss) const;

  /// found_inf := 1 when any of `grads` holds an inf or a NaN, else 0; then every gradient is
  /// divided by the scale in place (all of them, whatever found_inf says, as GradScaler does).
  /// Undefined gradients are left out. All of them on the scaler's device.
  void unscale(const std::vector<torch::Tensor>& grads);

  /// After the optimizer's step: a non-finite gradient halves the scale, resets the growth tracker
  /// and counts the step as skipped; otherwise the tracker advances, and at growth_interval the
  /// scale doubles (if the result is finite) and the tracker restarts.
  void update();

  /// float32 [1]: 1 when the last unscale() found an inf or a NaN.
  const torch::Tensor& found_inf() const { return found_inf_; }
  /// float32 [1]: the scale the next scale_loss() multiplies by.
  const torch::Tensor& scale() const { return scale_; }

  /// What a checkpoint and a report keep (read from the device: this waits for it).
  struct State {
    double scale = 0;
    std::int64_t growth_tracker = 0;
    std::int64_t skipped_steps = 0;  ///< steps whose gradients held an inf or a NaN
  };
  State state() const;
  /// \throws UsageError when the scale is not finite and positive or a count is negative.
  void load(const State& state);

  const Options& options() const { return options_; }

 private:
  Options options_;
  torch::Tensor scale_;           // float32 [1]
  torch::Tensor growth_tracker_;  // int32 [1], as _amp_update_scale_ takes it
  torch::Tensor found_inf_;       // float32 [1]
  torch::Tensor skipped_;         // int64 [1]
};

/// The run-wide steps a scaler skipped, from one found-inf flag a step (`flags`: found_inf() copied
/// after each step's update(), any dtype, any device; element k is step first_step + k), in order.
/// Reads the flags' device (this waits for it).
std::vector<std::int64_t> skipped_steps_of(const torch::Tensor& flags, std::int64_t first_step);

namespace detail {
/// unscale()'s arithmetic in tensor operations, for devices without PyTorch's kernel (and for
/// testing that kernel against): found_inf (float32 [1]) := any non-finite in grads; each
/// gradient *= inv_scale (float32 [1]).
void unscale_with_tensor_ops(const std::vector<torch::Tensor>& grads, torch::Tensor& found_inf,
                             const torch::Tensor& inv_scale);
/// update()'s arithmetic in tensor operations (scale float32 [1], tracker int32 [1]).
void update_with_tensor_ops(torch::Tensor& scale, torch::Tensor& growth_tracker,
                            const torch::Tensor& found_inf, double growth_factor,
                            double backoff_factor, std::int64_t growth_interval);
}  // namespace detail

}  // namespace workload
