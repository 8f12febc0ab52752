// The reference implementation of a fused bottleneck's pieces in LibTorch's operations
// (lib/model/conv_bn_ops.h).
#include "lib/model/conv_bn_ops.h"

#include <ATen/ATen.h>

#include <array>
#include <utility>
#include <vector>

namespace workload {

namespace {

/// A per-channel vector [C] broadcast over NCHW.
torch::Tensor per_channel(const torch::Tensor& v) { return v.view({1, -1, 1, 1}); }

/// The convolution's input as conv_stats applies it: relu(x * scale + bias) in fp32, rounded to
/// x's dtype and laid out as x, or x itself.
torch::Tensor prologue_applied(const torch::Tensor& x, const std::optional<Prologue>& p) {
  if (!p) return x;
  return at::relu(x.to(at::kFloat) * per_channel(p->scale) + per_channel(p->bias))
      .to(x.scalar_type())
      .contiguous(x.suggest_memory_format());
}

std::array<bool, 3> mask(bool input, bool weight) { return {input, weight, false}; }

class ReferenceConvBnOps final : public ConvBnOps {
 public:
  ConvStats conv_stats(const torch::Tensor& x, const torch::Tensor& w, ConvSpec spec,
                       const std::optional<Prologue>& prologue) const override {
    const torch::Tensor in = prologue_applied(x, prologue);
    const torch::Tensor y =
        at::convolution(in, w.to(x.scalar_type()), {}, {spec.stride, spec.stride},
                        {spec.pad, spec.pad}, {1, 1}, false, {0, 0}, 1);
    // Float sums, as cuDNN's GenStats gives them.
    const torch::Tensor yf = y.to(at::kFloat);
    return {y, yf.sum({0, 2, 3}), (yf * yf).sum({0, 2, 3})};
  }

  BnFinal finalize(const torch::Tensor& sum, const torch::Tensor& sqsum, std::int64_t count,
                   const torch::Tensor& weight, const torch::Tensor& bias,
                   torch::Tensor& running_mean, torch::Tensor& running_var, double momentum,
                   double eps) const override {
    // In double: E[y^2] - E[y]^2 cancels where a channel's mean outweighs its spread.
    const double m = static_cast<double>(count);
    const torch::Tensor mean_d = sum.to(at::kDouble) / m;
    const torch::Tensor var_d = (sqsum.to(at::kDouble) / m - mean_d * mean_d).clamp_min(0);
    const torch::Tensor mean = mean_d.to(at::kFloat), var = var_d.to(at::kFloat);
    const torch::Tensor invstd = at::rsqrt(var_d + eps).to(at::kFloat);
    const torch::Tensor scale = weight.to(at::kFloat) * invstd;
    {
      at::NoGradGuard no_grad;
      running_mean.mul_(1 - momentum).add_(mean.to(running_mean.scalar_type()), momentum);
      const double unbiased = count > 1 ? m / (m - 1) : 1.0;
      running_var.mul_(1 - momentum).add_((var * unbiased).to(running_var.scalar_type()), momentum);
    }
    return {mean, invstd, scale, bias.to(at::kFloat) - mean * scale};
  }

  torch::Tensor dgrad(const torch::Tensor& dy, const torch::Tensor& w, ConvSpec spec,
                      at::IntArrayRef x_sizes) const override {
    // The input's values are not read for its own gradient: an empty one of its shape and layout.
    const torch::Tensor x = at::empty(x_sizes, dy.options(), dy.suggest_memory_format());
    return std::get<0>(at::convolution_backward(dy, x, w.to(dy.scalar_type()), c10::nullopt,
                                                {spec.stride, spec.stride}, {spec.pad, spec.pad},
                                                {1, 1}, false, {0, 0}, 1, mask(true, false)));
  }

  torch::Tensor dgrad_add(const torch::Tensor& dy, const torch::Tensor& w, ConvSpec spec,
                          const torch::Tensor& r, const torch::Tensor& relu_out) const override {
    const torch::Tensor sum = dgrad(dy, w, spec, r.sizes()) + r;
    return relu_out.defined() ? at::threshold_backward(sum, relu_out, 0) : sum;
  }

  torch::Tensor wgrad(const torch::Tensor& x, const torch::Tensor& dy, ConvSpec spec,
                      at::IntArrayRef w_sizes,
                      const std::optional<Prologue>& prologue) const override {
    const torch::Tensor in = prologue_applied(x, prologue);
    const torch::Tensor w = at::empty(w_sizes, dy.options(), dy.suggest_memory_format());
    return std::get<1>(at::convolution_backward(dy, in, w, c10::nullopt, {spec.stride, spec.stride},
                                                {spec.pad, spec.pad}, {1, 1}, false, {0, 0}, 1,
                                                mask(false, true)));
  }

  BnGrads dgrad_drelu_bn(const torch::Tensor& dy, const torch::Tensor& w, ConvSpec spec,
                         const torch::Tensor& x, const BnFinal& bn_final,
                         const torch::Tensor& weight) const override {
    const torch::Tensor dr = dgrad(dy, w, spec, x.sizes());
    const torch::Tensor bn_out =
        x.to(at::kFloat) * per_channel(bn_final.scale) + per_channel(bn_final.bias);
    const torch::Tensor dz = (dr.to(at::kFloat) * bn_out.gt(0)).to(x.scalar_type());
    return bn_grads(dz.contiguous(x.suggest_memory_format()), x, bn_final, weight);
  }

  BnGrads bn_grads(const torch::Tensor& dz, const torch::Tensor& x, const BnFinal& f,
                   const torch::Tensor& weight) const override {
    const torch::Tensor dzf = dz.to(at::kFloat);
    const torch::Tensor xhat = (x.to(at::kFloat) - per_channel(f.mean)) * per_channel(f.invstd);
    return bn_grads_from_sums(dz, (dzf * xhat).sum({0, 2, 3}), dzf.sum({0, 2, 3}), f, weight,
                              x.numel() / x.size(1));
  }

  torch::Tensor dbn_apply(const BnGrads& g, const torch::Tensor& x) const override {
    return (g.dz.to(at::kFloat) * per_channel(g.a) + x.to(at::kFloat) * per_channel(g.b) +
            per_channel(g.c))
        .to(x.scalar_type())
        .contiguous(x.suggest_memory_format());
  }

  torch::Tensor output(const torch::Tensor& y, const BnFinal& bn, const torch::Tensor& r,
                       const BnFinal* res_bn) const override {
    torch::Tensor v = y.to(at::kFloat) * per_channel(bn.scale) + per_channel(bn.bias);
    if (res_bn != nullptr) {
      v = v + r.to(at::kFloat) * per_channel(res_bn->scale) + per_channel(res_bn->bias);
    } else {
      v = v + r.to(at::kFloat);
    }
    return at::relu(v).to(y.scalar_type()).contiguous(y.suggest_memory_format());
  }
};

}  // namespace

BnGrads bn_grads_from_sums(const torch::Tensor& dz, torch::Tensor dweight, torch::Tensor dbias,
                           const BnFinal& bn_final, const torch::Tensor& weight,
                           std::int64_t count) {
  const double m = static_cast<double>(count);
  const torch::Tensor wf = weight.to(at::kFloat), &invstd = bn_final.invstd;
  BnGrads g;
  g.dz = dz;
  g.dweight = std::move(dweight);
  g.dbias = std::move(dbias);
  // dx = weight * invstd / M * (M dz - dbias - xhat dweight), as a * dz + b * x + c.
  g.a = wf * invstd;
  g.b = -wf * invstd * invstd * g.dweight / m;
  g.c = -wf * invstd * g.dbias / m - g.b * bn_final.mean;
  return g;
}

std::pair<BnGrads, BnGrads> ConvBnOps::bn_grads_pair(const torch::Tensor& dz, const BnInput& first,
                                                     const BnInput& second) const {
  return {bn_grads(dz, first.x, first.stats, first.weight),
          bn_grads(dz, second.x, second.stats, second.weight)};
}

const ConvBnOps& reference_conv_bn_ops() {
  static const ReferenceConvBnOps kOps;
  return kOps;
}

#if !defined(WORKLOAD_HAVE_CUDNN_GRAPH)
const ConvBnOps* cudnn_conv_bn_ops(SumOrder /*order*/) {
  return nullptr;
}  // cudnn_conv_bn_ops.cpp where built
#endif

}  // namespace workload
