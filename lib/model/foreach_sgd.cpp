// SGD with momentum and weight decay on multi-tensor (_foreach_) kernels, as PyTorch's default.
#include "lib/model/foreach_sgd.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define WORKLOAD_HAVE_FUSED_SGD 1
#else
#define WORKLOAD_HAVE_FUSED_SGD 0
#endif

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace workload {

namespace {

// tensors[i] * scalar (a 0-dim tensor on their device), read on the device. LibTorch 2.1 added
// the multi-tensor overload; before it, the same products one tensor at a time (the same
// multiplication, and on the CPU what the multi-tensor one does anyway).
std::vector<torch::Tensor> times(const std::vector<torch::Tensor>& tensors,
                                 const torch::Tensor& scalar) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  return at::_foreach_mul(tensors, scalar);
#else
  std::vector<torch::Tensor> out;
  out.reserve(tensors.size());
  for (const torch::Tensor& t : tensors) out.push_back(t.mul(scalar));
  return out;
#endif
}

}  // namespace

ForeachSgd::ForeachSgd(std::vector<torch::Tensor> params, double lr, double momentum,
                       double weight_decay)
    : params_(std::move(params)),
      momentum_(params_.size()),
      lr_(lr),
      momentum_factor_(momentum),
      weight_decay_(weight_decay) {
  if (lr < 0 || momentum < 0 || weight_decay < 0) {
    throw std::invalid_argument("ForeachSgd: lr, momentum and weight_decay must be >= 0");
  }
}

ForeachSgd::ForeachSgd(std::vector<torch::Tensor> params, const LrSchedule& schedule,
                       double momentum, double weight_decay, LrSource source)
    : ForeachSgd(std::move(params), schedule.options().peak_lr, momentum, weight_decay) {
  if (schedule.constant()) return;  // the article's step: the peak as a scalar
  if (source == LrSource::kHost) {
    schedule_ = schedule;
    return;
  }
  const std::int64_t total = schedule.options().total_steps;
  std::vector<float> table(static_cast<std::size_t>(total));
  for (std::int64_t k = 0; k < total; ++k) {
    table[static_cast<std::size_t>(k)] = static_cast<float>(-schedule.lr_at(k));
  }
  const torch::Device device = params_.empty() ? torch::Device(torch::kCPU) : params_[0].device();
  // Made once, before any capture: a graph reads and writes these in place.
  lr_table_ = torch::tensor(table, torch::kFloat32).to(device);
  step_ = torch::zeros({1}, torch::TensorOptions().dtype(torch::kInt64).device(device));
  last_step_ = total - 1;
}

void ForeachSgd::with_gradients(std::vector<torch::Tensor>& params,
                                std::vector<torch::Tensor>& grads,
                                std::vector<std::size_t>& index) const {
  params.reserve(params_.size());
  grads.reserve(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const torch::Tensor& g = params_[i].grad();
    if (!g.defined()) continue;
    params.push_back(params_[i]);
    grads.push_back(g);
    index.push_back(i);
  }
}

void ForeachSgd::step() {
  torch::NoGradGuard no_grad;
  const std::int64_t k = steps_++;
  std::vector<torch::Tensor> params, grads;
  std::vector<std::size_t> index;
  with_gradients(params, grads, index);
  if (params.empty()) return;
  // In place: no new tensor a parameter (the gradients then hold grad + weight_decay * p).
  if (weight_decay_ != 0) at::_foreach_add_(grads, params, weight_decay_);
  if (momentum_factor_ != 0) grads = with_momentum(index, grads);
  if (lr_table_.defined()) {
    update_from_table(params, grads);
  } else {
    const double lr = schedule_ ? schedule_->lr_at(k) : lr_;
    at::_foreach_add_(params, grads, -lr);
  }
}

bool ForeachSgd::skips_on_device() const {
  return WORKLOAD_HAVE_FUSED_SGD && !params_.empty() && params_[0].is_cuda();
}

void ForeachSgd::step(const torch::Tensor& found_inf) {
  if (!found_inf.defined() || found_inf.numel() != 1 || found_inf.scalar_type() != torch::kFloat) {
    throw std::invalid_argument(
        "ForeachSgd::step: found_inf must be a float32 tensor of one value");
  }
  if (skips_on_device()) {
    fused_step(found_inf);
    return;
  }
  if (found_inf.item<float>() == 0.0f) {
    step();
    return;
  }
  // Skipped: the schedule moves on, nothing else.
  ++steps_;
  if (lr_table_.defined()) step_.add_(1).clamp_max_(last_step_);
}

torch::Tensor ForeachSgd::device_lr() {
  // This step's LR, read before the counter moves on (stream order keeps the two apart).
  torch::Tensor lr = lr_table_.index_select(0, step_).squeeze(0).neg();
  step_.add_(1).clamp_max_(last_step_);
  return lr;
}

void ForeachSgd::fused_step(const torch::Tensor& found_inf) {
#if WORKLOAD_HAVE_FUSED_SGD
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> params, grads;
  std::vector<std::size_t> index;
  with_gradients(params, grads, index);
  const bool host_lr = !lr_table_.defined();
  const double lr = schedule_ ? schedule_->lr_at(steps_) : lr_;
  const torch::Tensor lr_tensor = host_lr ? torch::Tensor() : device_lr();
  ++steps_;
  if (params.empty()) return;
  std::vector<torch::Tensor> bufs;
  if (momentum_factor_ != 0) {
    // Every buffer made at the first call, zero: momentum * 0 + grad is the first step's grad,
    // and a skipped step leaves the zeros (is_first_step would need the host to know).
    for (std::size_t i : index) {
      if (!momentum_[i].defined()) momentum_[i] = torch::zeros_like(params_[i]);
      bufs.push_back(momentum_[i]);
    }
  }
  const std::optional<at::Tensor> no_scale, inf = found_inf;
  if (host_lr) {
    at::_fused_sgd_(params, grads, bufs, weight_decay_, momentum_factor_, lr, 0.0, false, false,
                    false, no_scale, inf);
  } else {
    at::_fused_sgd_(params, grads, bufs, weight_decay_, momentum_factor_, lr_tensor, 0.0, false,
                    false, false, no_scale, inf);
  }
#else
  (void)found_inf;
  throw std::logic_error("ForeachSgd: this LibTorch has no fused SGD");
#endif
}

std::vector<torch::Tensor> ForeachSgd::with_momentum(const std::vector<std::size_t>& index,
                                                     const std::vector<torch::Tensor>& grads) {
  std::vector<torch::Tensor> bufs;
  bufs.reserve(index.size());
  bool all_have_buffers = true;
  for (std::size_t i : index) all_have_buffers = all_have_buffers && momentum_[i].defined();
  if (all_have_buffers) {
    for (std::size_t i : index) bufs.push_back(momentum_[i]);
    at::_foreach_mul_(bufs, momentum_factor_);
    at::_foreach_add_(bufs, grads, 1.0);
    return bufs;
  }
  // First step (for some parameter): the buffer starts as a copy of the gradient.
  for (std::size_t j = 0; j < index.size(); ++j) {
    torch::Tensor& buf = momentum_[index[j]];
    if (!buf.defined()) {
      buf = grads[j].clone().detach();
    } else {
      buf.mul_(momentum_factor_).add_(grads[j]);
    }
    bufs.push_back(buf);
  }
  return bufs;
}

void ForeachSgd::load_state(const State& state) {
  if (state.momentum.size() != params_.size()) {
    throw std::invalid_argument("optimizer state: " + std::to_string(state.momentum.size()) +
                                " momentum buffers for " + std::to_string(params_.size()) +
                                " parameters");
  }
  if (state.steps < 0) throw std::invalid_argument("optimizer state: negative step count");
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> momentum(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const torch::Tensor& saved = state.momentum[i];
    if (!saved.defined()) continue;
    if (saved.sizes() != params_[i].sizes()) {
      throw std::invalid_argument("optimizer state: momentum buffer " + std::to_string(i) +
                                  " has the wrong shape for its parameter");
    }
    // Laid out as the parameter (channels_last), as the first step's clone of its gradient is.
    momentum[i] = torch::empty_like(params_[i]).copy_(saved);
  }
  momentum_ = std::move(momentum);
  steps_ = state.steps;
  if (lr_table_.defined()) step_.fill_(std::min(steps_, last_step_));
}

void ForeachSgd::update_from_table(const std::vector<torch::Tensor>& params,
                                   const std::vector<torch::Tensor>& updates) {
  // This step's -lr, read before the counter moves on (stream order keeps the two apart).
  const torch::Tensor neg_lr = lr_table_.index_select(0, step_).squeeze(0);
  step_.add_(1).clamp_max_(last_step_);
  // torch.optim.SGD's update with a tensor lr: torch._foreach_add_(params, grads * -lr).
  at::_foreach_add_(params, times(updates, neg_lr));
}

}  // namespace workload
