// Dynamic loss scaling with its state on the device (lib/model/loss_scaler.h).
#include "lib/model/loss_scaler.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "lib/core/usage_error.h"

namespace workload {

namespace {

void check_options(const LossScaler::Options& o) {
  auto bad = [](const std::string& what, double v) {
    throw UsageError("loss scaling: " + what + ", got " + std::to_string(v));
  };
  if (!(std::isfinite(o.init_scale) && o.init_scale > 0)) {
    bad("the initial scale must be finite and positive", o.init_scale);
  }
  if (!(std::isfinite(o.growth_factor) && o.growth_factor > 1)) {
    bad("the growth factor must be above 1", o.growth_factor);
  }
  if (!(o.backoff_factor > 0 && o.backoff_factor < 1)) {
    bad("the backoff factor must lie in (0, 1)", o.backoff_factor);
  }
  if (o.growth_interval < 1) {
    bad("the growth interval must be at least 1", static_cast<double>(o.growth_interval));
  }
}

}  // namespace

namespace detail {

void unscale_with_tensor_ops(const std::vector<torch::Tensor>& grads, torch::Tensor& found_inf,
                             const torch::Tensor& inv_scale) {
  at::Tensor any = at::zeros({1}, found_inf.options().dtype(at::kBool));
  for (const auto& g : grads) {
    if (!g.defined()) continue;
    any.logical_or_(at::isfinite(g).logical_not().any().view({1}));
    g.mul_(inv_scale);
  }
  found_inf.copy_(any);
}

void update_with_tensor_ops(torch::Tensor& scale, torch::Tensor& growth_tracker,
                            const torch::Tensor& found_inf, double growth_factor,
                            double backoff_factor, std::int64_t growth_interval) {
  const at::Tensor found = found_inf > 0;
  const at::Tensor successful = growth_tracker + 1;
  const at::Tensor at_interval = (successful == growth_interval).logical_and(found.logical_not());
  const at::Tensor grown = scale * growth_factor;
  const at::Tensor new_scale =
      at::where(found, scale * backoff_factor,
                at::where(at_interval.logical_and(at::isfinite(grown)), grown, scale));
  // As _amp_update_scale_: the tracker restarts at the interval even when the grown scale would
  // not be finite (the scale then stays).
  const at::Tensor new_tracker =
      at::where(found.logical_or(at_interval), at::zeros_like(growth_tracker), successful);
  scale.copy_(new_scale);
  growth_tracker.copy_(new_tracker);
}

}  // namespace detail

LossScaler::LossScaler(torch::Device device, Options options) : options_(options) {
  check_options(options_);
  const auto f32 = torch::TensorOptions().device(device).dtype(torch::kFloat32);
  scale_ = torch::full({1}, options_.init_scale, f32);
  growth_tracker_ = torch::zeros({1}, f32.dtype(torch::kInt32));
  found_inf_ = torch::zeros({1}, f32);
  skipped_ = torch::zeros({1}, f32.dtype(torch::kInt64));
}

torch::Tensor LossScaler::scale_loss(const torch::Tensor& loss) const {
  return loss.to(torch::kFloat32) * scale_;
}

void LossScaler::unscale(const std::vector<torch::Tensor>& grads) {
  // GradScaler's inverse: the reciprocal in double, rounded once to float.
  const torch::Tensor inv_scale = scale_.to(torch::kFloat64).reciprocal().to(torch::kFloat32);
  found_inf_.zero_();
  std::vector<torch::Tensor> defined;
  defined.reserve(grads.size());
  for (const auto& g : grads) {
    if (!g.defined()) continue;
    TORCH_CHECK(g.device() == scale_.device(), "loss scaling: a gradient on ", g.device(),
                ", the scaler on ", scale_.device());
    defined.push_back(g);
  }
  if (scale_.is_cuda()) {
    at::_amp_foreach_non_finite_check_and_unscale_(defined, found_inf_, inv_scale);
  } else {
    detail::unscale_with_tensor_ops(defined, found_inf_, inv_scale);
  }
}

void LossScaler::update() {
  if (scale_.is_cuda()) {
    at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, options_.growth_factor,
                           options_.backoff_factor, options_.growth_interval);
  } else {
    detail::update_with_tensor_ops(scale_, growth_tracker_, found_inf_, options_.growth_factor,
                                   options_.backoff_factor, options_.growth_interval);
  }
  skipped_.add_(found_inf_.to(torch::kInt64));
}

std::vector<std::int64_t> skipped_steps_of(const torch::Tensor& flags, std::int64_t first_step) {
  const at::Tensor set = at::nonzero(flags.reshape({-1}).ne(0)).reshape({-1}).to(at::kCPU);
  std::vector<std::int64_t> steps;
  steps.reserve(static_cast<std::size_t>(set.numel()));
  const auto index = set.accessor<std::int64_t, 1>();
  for (std::int64_t k = 0; k < set.numel(); ++k) steps.push_back(first_step + index[k]);
  return steps;
}

LossScaler::State LossScaler::state() const {
  return {scale_.item<double>(), growth_tracker_.item<std::int64_t>(),
          skipped_.item<std::int64_t>()};
}

void LossScaler::load(const State& s) {
  if (!(std::isfinite(s.scale) && s.scale > 0) || s.growth_tracker < 0 || s.skipped_steps < 0 ||
      s.growth_tracker >= options_.growth_interval) {
    throw UsageError("loss scaling: a saved state of scale " + std::to_string(s.scale) +
                     ", growth tracker " + std::to_string(s.growth_tracker) + " and " +
                     std::to_string(s.skipped_steps) +
                     " skipped steps cannot be loaded (the scale must be finite and positive, "
                     "the tracker below the growth interval " +
                     std::to_string(options_.growth_interval) + ")");
  }
  scale_.fill_(s.scale);
  growth_tracker_.fill_(s.growth_tracker);
  skipped_.fill_(s.skipped_steps);
  found_inf_.zero_();
}

}  // namespace workload
