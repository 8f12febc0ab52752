// SGD with momentum and weight decay on multi-tensor (_foreach_) kernels, as PyTorch's default.
#pragma once

#include <torch/types.h>

#include <vector>

namespace workload {

/// SGD equal to `torch.optim.SGD(params, lr, momentum, weight_decay)` with its default
/// `foreach=True` implementation on CUDA: weight decay, the momentum update and the parameter
/// update each run as one multi-tensor operation over all parameters (a handful of kernels per
/// step instead of several per parameter, as LibTorch's per-parameter `torch::optim::SGD` does).
/// The arithmetic, and so every result, is the same as `torch::optim::SGD` (no dampening, no
/// Nesterov): buf = grad on the first step, then buf = momentum * buf + grad; p -= lr * buf.
///
/// Not thread-safe; use from the training thread.
class ForeachSgd {
 public:
  ForeachSgd(std::vector<torch::Tensor> params, double lr, double momentum, double weight_decay);

  /// Updates every parameter that has a gradient. Parameters without one are skipped, and a
  /// parameter's momentum buffer is created the first time it has a gradient.
  void step();

  const std::vector<torch::Tensor>& parameters() const { return params_; }

 private:
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> momentum_;  // one per parameter; undefined until its first step
  double lr_;
  double momentum_factor_;
  double weight_decay_;
};

}  // namespace workload
