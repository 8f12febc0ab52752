// BatchNorm2d modules through cuDNN's fused batch-norm kernels
// (lib/model/cudnn_bn/fused_batch_norm.h).
#include "lib/model/cudnn_bn/fused_batch_norm.h"

#include <cudnn.h>
#include <torch/autograd.h>

namespace workload::cudnn_bn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// What a fused batch norm saves for backward: x, y (for the activation's gradient), the batch
/// statistics and cuDNN's reserve space, which must outlive forward until backward has run.
torch::Tensor save_and_return(AutogradContext* ctx, const torch::Tensor& x,
                              const torch::Tensor& weight, const torch::Tensor& bias, BnForward r,
                              double eps, BnOps ops) {
  ctx->save_for_backward({x, ops == BnOps::kBn ? torch::Tensor() : r.y, weight, bias, r.save_mean,
                          r.save_inv_var, r.reserve});
  ctx->saved_data["eps"] = eps;
  ctx->saved_data["ops"] = static_cast<std::int64_t>(ops);
  return r.y;
}

BnBackward backward_from_saved(AutogradContext* ctx, const variable_list& grad_outputs) {
  const variable_list s = ctx->get_saved_variables();
  const torch::Tensor& x = s[0];
  const BnForward saved{s[1], s[4], s[5], s[6]};
  // Autograd hands over whatever layout the next op's backward produced.
  const torch::Tensor dy =
      grad_outputs[0].to(x.scalar_type()).contiguous(torch::MemoryFormat::ChannelsLast);
  return batch_norm_backward(x, dy, s[2], s[3], saved, ctx->saved_data["eps"].toDouble(),
                             static_cast<BnOps>(ctx->saved_data["ops"].toInt()));
}

/// BN or BN+ReLU as an autograd node (kBn or kBnRelu).
class FusedBnFunction : public torch::autograd::Function<FusedBnFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               const torch::Tensor& running_mean, const torch::Tensor& running_var,
                               double momentum, double eps, std::int64_t ops) {
    const auto bn_ops = static_cast<BnOps>(ops);
    return save_and_return(
        ctx, x, weight, bias,
        batch_norm_forward(x, {}, weight, bias, running_mean, running_var, momentum, eps, bn_ops),
        eps, bn_ops);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    BnBackward g = backward_from_saved(ctx, grad_outputs);
    return {g.dx, g.dweight, g.dbias, {}, {}, {}, {}, {}};
  }
};

/// BN+add+ReLU as an autograd node: a node of its own because every tensor input of a node needs a
/// value (the residual z here), and its gradient is returned.
class FusedBnAddReluFunction : public torch::autograd::Function<FusedBnAddReluFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& z,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               const torch::Tensor& running_mean, const torch::Tensor& running_var,
                               double momentum, double eps) {
    return save_and_return(ctx, x, weight, bias,
                           batch_norm_forward(x, z, weight, bias, running_mean, running_var,
                                              momentum, eps, BnOps::kBnAddRelu),
                           eps, BnOps::kBnAddRelu);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    BnBackward g = backward_from_saved(ctx, grad_outputs);
    return {g.dx, g.dz, g.dweight, g.dbias, {}, {}, {}, {}};
  }
};

}  // namespace

bool fusable(const torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x, BnOps ops) {
  const auto& o = bn.options;
  const auto t = x.scalar_type();
  return bn.is_training() && o.affine() && o.track_running_stats() && o.momentum().has_value() &&
         o.eps() >= CUDNN_BN_MIN_EPSILON && bn.weight.scalar_type() == torch::kFloat &&
         x.is_cuda() && x.dim() == 4 &&
         (t == torch::kFloat || t == torch::kHalf || t == torch::kBFloat16) &&
         (ops != BnOps::kBnAddRelu || x.size(1) % 4 == 0) && cudnn_accepts(x, ops);
}

torch::Tensor fused_batch_norm(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x,
                               const torch::Tensor& z, BnOps ops) {
  const auto cl = torch::MemoryFormat::ChannelsLast;
  const double momentum = *bn.options.momentum(), eps = bn.options.eps();
  if (ops == BnOps::kBnAddRelu) {
    return FusedBnAddReluFunction::apply(x.contiguous(cl), z.to(x.scalar_type()).contiguous(cl),
                                         bn.weight, bn.bias, bn.running_mean, bn.running_var,
                                         momentum, eps);
  }
  return FusedBnFunction::apply(x.contiguous(cl), bn.weight, bn.bias, bn.running_mean,
                                bn.running_var, momentum, eps, static_cast<std::int64_t>(ops));
}

}  // namespace workload::cudnn_bn
