// SGD with momentum and weight decay on multi-tensor (_foreach_) kernels, as PyTorch's default.
#include "lib/model/foreach_sgd.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <stdexcept>
#include <utility>

namespace workload {

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

void ForeachSgd::step() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> params, grads, bufs;
  std::vector<std::size_t> index;
  params.reserve(params_.size());
  grads.reserve(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const torch::Tensor& g = params_[i].grad();
    if (!g.defined()) continue;
    params.push_back(params_[i]);
    grads.push_back(g);
    index.push_back(i);
  }
  if (params.empty()) return;
  if (weight_decay_ != 0) grads = at::_foreach_add(grads, params, weight_decay_);
  if (momentum_factor_ != 0) {
    bool all_have_buffers = true;
    for (std::size_t k : index) all_have_buffers = all_have_buffers && momentum_[k].defined();
    if (all_have_buffers) {
      for (std::size_t k : index) bufs.push_back(momentum_[k]);
      at::_foreach_mul_(bufs, momentum_factor_);
      at::_foreach_add_(bufs, grads, 1.0);
    } else {
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
    }
    grads = std::move(bufs);
  }
  at::_foreach_add_(params, grads, -lr_);
}

}  // namespace workload
