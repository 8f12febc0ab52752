// A bottleneck block's training forward and backward in ConvBnOps' pieces
// (lib/model/fused_bottleneck.h).
#include "lib/model/fused_bottleneck.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "lib/model/norm_activation.h"

namespace workload {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// The convolution's explicit padding, or null for "valid" or "same". LibTorch's options hold it in
/// a c10::variant (1.x) or a std::variant (2.x): `get_if` found for either (std's by the using,
/// c10's by argument-dependent lookup).
const torch::ExpandingArray<2>* explicit_padding(const torch::nn::Conv2dImpl& c) {
  using std::get_if;
  return get_if<torch::ExpandingArray<2>>(&c.options.padding());
}

ConvSpec spec_of(const torch::nn::Conv2dImpl& c) {
  return {(**explicit_padding(c))[0], (*c.options.stride())[0]};
}

/// The values of one normalised channel per batch: N x H x W.
std::int64_t per_channel_count(const torch::Tensor& y) { return y.numel() / y.size(1); }

/// The BN of `bn` finalised from `c`'s sums, its running statistics and counter moved on.
BnFinal finalize_bn(const ConvBnOps& ops, const ConvStats& c, torch::nn::BatchNorm2dImpl& bn) {
  BnFinal f =
      ops.finalize(c.sum, c.sqsum, per_channel_count(c.y), bn.weight, bn.bias, bn.running_mean,
                   bn.running_var, *bn.options.momentum(), bn.options.eps());
  DeferredBatchCounts::count(bn.num_batches_tracked);
  return f;
}

// What forward keeps for backward, in this order (a BN's four tensors each; the shortcut's BN and
// activation undefined without one).
enum Saved : std::size_t {
  kX,
  kA1,
  kA2,
  kA3,
  kAd,
  kOut,
  kW1,
  kW2,
  kW3,
  kWd,
  kG1,
  kG2,
  kG3,
  kGd,
  kFinals,  // 4 x (mean, invstd, scale, bias), bn1, bn2, bn3, downsample
  kSavedCount = kFinals + 16
};

void save_final(std::vector<torch::Tensor>& saved, std::size_t i, const BnFinal& f) {
  saved[kFinals + 4 * i] = f.mean;
  saved[kFinals + 4 * i + 1] = f.invstd;
  saved[kFinals + 4 * i + 2] = f.scale;
  saved[kFinals + 4 * i + 3] = f.bias;
}

BnFinal load_final(const variable_list& saved, std::size_t i) {
  return {saved[kFinals + 4 * i], saved[kFinals + 4 * i + 1], saved[kFinals + 4 * i + 2],
          saved[kFinals + 4 * i + 3]};
}

Prologue prologue_of(const BnFinal& f) { return {f.scale, f.bias}; }

// The inputs of the node, in this order: x, w1, w2, w3, g1, b1, g2, b2, g3, b3, then the
// shortcut's wd, gd, bd where it has one (an autograd node takes no undefined input).
enum Input : std::size_t {
  kInX,
  kInW1,
  kInW2,
  kInW3,
  kInBn,              // g1, b1, g2, b2, g3, b3
  kInWd = kInBn + 6,  // the shortcut's weight, then its BN's weight and bias
  kInputsPlain = kInWd,
  kInputsShortcut = kInWd + 3
};

/// The one node of a block: forward in ConvBnOps' pieces, backward in theirs.
struct FusedBottleneckFunction : public torch::autograd::Function<FusedBottleneckFunction> {
  static torch::Tensor forward(AutogradContext* ctx, at::TensorList in, std::int64_t ops_address,
                               std::int64_t modules_address, bool input_relu,
                               bool output_grad_through_relu) {
    const auto& ops = *reinterpret_cast<const ConvBnOps*>(ops_address);            // NOLINT
    const auto& m = *reinterpret_cast<const BottleneckModules*>(modules_address);  // NOLINT
    const torch::Tensor& x = in[kInX];
    const at::ScalarType dt = x.scalar_type();
    const bool shortcut = in.size() == kInputsShortcut;
    const ConvSpec s1 = spec_of(*m.conv1), s2 = spec_of(*m.conv2), s3 = spec_of(*m.conv3);
    std::vector<torch::Tensor> w = {in[kInW1].to(dt), in[kInW2].to(dt), in[kInW3].to(dt),
                                    shortcut ? in[kInWd].to(dt) : torch::Tensor()};
    const ConvStats c1 = ops.conv_stats(x, w[0], s1, std::nullopt);
    const BnFinal f1 = finalize_bn(ops, c1, *m.bn1);
    const ConvStats c2 = ops.conv_stats(c1.y, w[1], s2, prologue_of(f1));
    const BnFinal f2 = finalize_bn(ops, c2, *m.bn2);
    const ConvStats c3 = ops.conv_stats(c2.y, w[2], s3, prologue_of(f2));
    const BnFinal f3 = finalize_bn(ops, c3, *m.bn3);
    std::optional<ConvStats> cd;
    std::optional<BnFinal> fd;
    if (shortcut) {
      cd = ops.conv_stats(x, w[3], spec_of(*m.downsample_conv), std::nullopt);
      fd = finalize_bn(ops, *cd, *m.downsample_bn);
    }
    torch::Tensor out = ops.output(c3.y, f3, shortcut ? cd->y : x, fd ? &*fd : nullptr);

    std::vector<torch::Tensor> saved(kSavedCount);
    saved[kX] = x;
    saved[kA1] = c1.y;
    saved[kA2] = c2.y;
    saved[kA3] = c3.y;
    saved[kOut] = out;
    for (std::size_t i = 0; i < 4; ++i) saved[kW1 + i] = w[i];
    saved[kG1] = in[kInBn];
    saved[kG2] = in[kInBn + 2];
    saved[kG3] = in[kInBn + 4];
    save_final(saved, 0, f1);
    save_final(saved, 1, f2);
    save_final(saved, 2, f3);
    if (shortcut) {
      saved[kAd] = cd->y;
      saved[kGd] = in[kInWd + 1];
      save_final(saved, 3, *fd);
    }
    ctx->save_for_backward(saved);
    ctx->saved_data["ops"] = ops_address;
    ctx->saved_data["shortcut"] = shortcut;
    ctx->saved_data["input_relu"] = input_relu;
    ctx->saved_data["output_grad_through_relu"] = output_grad_through_relu;
    const ConvSpec sd = shortcut ? spec_of(*m.downsample_conv) : ConvSpec{};
    ctx->saved_data["specs"] = std::vector<std::int64_t>{s1.pad, s1.stride, s2.pad, s2.stride,
                                                         s3.pad, s3.stride, sd.pad, sd.stride};
    // The weights' and the batch norms' parameters' dtypes, for their gradients.
    ctx->saved_data["weight_dtype"] = static_cast<std::int64_t>(in[kInW1].scalar_type());
    ctx->saved_data["bn_dtype"] = static_cast<std::int64_t>(in[kInBn].scalar_type());
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto& ops =
        *reinterpret_cast<const ConvBnOps*>(ctx->saved_data["ops"].toInt());  // NOLINT
    const bool shortcut = ctx->saved_data["shortcut"].toBool();
    const std::vector<std::int64_t> sp = ctx->saved_data["specs"].toIntVector();
    const ConvSpec s1{sp[0], sp[1]}, s2{sp[2], sp[3]}, s3{sp[4], sp[5]}, sd{sp[6], sp[7]};
    const auto weight_dtype = static_cast<at::ScalarType>(ctx->saved_data["weight_dtype"].toInt());
    const auto bn_dtype = static_cast<at::ScalarType>(ctx->saved_data["bn_dtype"].toInt());
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[kX], &a1 = saved[kA1], &a2 = saved[kA2], &a3 = saved[kA3];
    const BnFinal f1 = load_final(saved, 0), f2 = load_final(saved, 1), f3 = load_final(saved, 2);

    // The block's last ReLU follows the add: its gradient goes to bn3 and to the shortcut alike.
    // A next fused block with input_relu has applied it already.
    const torch::Tensor dz3 = ctx->saved_data["output_grad_through_relu"].toBool()
                                  ? grads[0]
                                  : at::threshold_backward(grads[0], saved[kOut], 0);
    // With a shortcut, dz3 is its BN's output gradient too: both BNs' sums in one read of it.
    const torch::Tensor dz3c = dz3.contiguous(a3.suggest_memory_format());
    BnGrads g3;
    std::optional<BnGrads> gd;
    if (shortcut) {
      std::tie(g3, gd) = ops.bn_grads_pair(dz3c, BnInput{a3, f3, saved[kG3]},
                                           BnInput{saved[kAd], load_final(saved, 3), saved[kGd]});
    } else {
      g3 = ops.bn_grads(dz3c, a3, f3, saved[kG3]);
    }
    const torch::Tensor da3 = ops.dbn_apply(g3, a3);
    torch::Tensor dx_shortcut = dz3, dwd;
    if (shortcut) {
      const torch::Tensor& ad = saved[kAd];
      const torch::Tensor dad = ops.dbn_apply(*gd, ad);
      dx_shortcut = ops.dgrad(dad, saved[kWd], sd, x.sizes());
      dwd = ops.wgrad(x, dad, sd, saved[kWd].sizes(), std::nullopt);
    }
    const torch::Tensor dw3 = ops.wgrad(a2, da3, s3, saved[kW3].sizes(), prologue_of(f2));
    const BnGrads g2 = ops.dgrad_drelu_bn(da3, saved[kW3], s3, a2, f2, saved[kG2]);
    const torch::Tensor da2 = ops.dbn_apply(g2, a2);
    const torch::Tensor dw2 = ops.wgrad(a1, da2, s2, saved[kW2].sizes(), prologue_of(f1));
    const BnGrads g1 = ops.dgrad_drelu_bn(da2, saved[kW2], s2, a1, f1, saved[kG1]);
    const torch::Tensor da1 = ops.dbn_apply(g1, a1);
    const torch::Tensor dw1 = ops.wgrad(x, da1, s1, saved[kW1].sizes(), std::nullopt);
    const torch::Tensor dx =
        ops.dgrad_add(da1, saved[kW1], s1, dx_shortcut,
                      ctx->saved_data["input_relu"].toBool() ? x : torch::Tensor());

    // One gradient an input of the list, then none for the two addresses and the two links.
    variable_list out((shortcut ? kInputsShortcut : kInputsPlain) + 4);
    const auto weight = [&](const torch::Tensor& g) { return g.to(weight_dtype); };
    const auto bn = [&](const torch::Tensor& g) { return g.to(bn_dtype); };
    out[kInX] = dx;
    out[kInW1] = weight(dw1);
    out[kInW2] = weight(dw2);
    out[kInW3] = weight(dw3);
    const BnGrads* bn_grads[] = {&g1, &g2, &g3};
    for (std::size_t i = 0; i < 3; ++i) {
      out[kInBn + 2 * i] = bn(bn_grads[i]->dweight);
      out[kInBn + 2 * i + 1] = bn(bn_grads[i]->dbias);
    }
    if (shortcut) {
      out[kInWd] = weight(dwd);
      out[kInWd + 1] = bn(gd->dweight);
      out[kInWd + 2] = bn(gd->dbias);
    }
    return out;
  }
};

bool bn_fusable(const torch::nn::BatchNorm2dImpl* bn) {
  return bn != nullptr && bn->is_training() && bn->options.affine() &&
         bn->options.track_running_stats() && bn->options.momentum().has_value();
}

bool conv_fusable(const torch::nn::Conv2dImpl* c) {
  if (c == nullptr) return false;
  const auto& o = c->options;
  const torch::ExpandingArray<2>* pad = explicit_padding(*c);
  return !o.bias() && o.groups() == 1 && (*o.dilation())[0] == 1 && (*o.dilation())[1] == 1 &&
         (*o.stride())[0] == (*o.stride())[1] && pad != nullptr && (**pad)[0] == (**pad)[1];
}

}  // namespace

bool fusable(const BottleneckModules& m) {
  const bool shortcut_ok = (m.downsample_conv == nullptr && m.downsample_bn == nullptr) ||
                           (conv_fusable(m.downsample_conv) && bn_fusable(m.downsample_bn));
  return conv_fusable(m.conv1) && conv_fusable(m.conv2) && conv_fusable(m.conv3) &&
         bn_fusable(m.bn1) && bn_fusable(m.bn2) && bn_fusable(m.bn3) && shortcut_ok;
}

torch::Tensor fused_bottleneck(const ConvBnOps& ops, const BottleneckModules& m,
                               const torch::Tensor& x, const ForwardWeights& w, ReluLinks links) {
  TORCH_CHECK(fusable(m), "fused_bottleneck: a block its pieces cannot run");
  std::vector<torch::Tensor> in = {
      x,           w[m.conv1->weight], w[m.conv2->weight], w[m.conv3->weight], m.bn1->weight,
      m.bn1->bias, m.bn2->weight,      m.bn2->bias,        m.bn3->weight,      m.bn3->bias};
  if (m.downsample_conv != nullptr) {
    in.insert(in.end(),
              {w[m.downsample_conv->weight], m.downsample_bn->weight, m.downsample_bn->bias});
  }
  return FusedBottleneckFunction::apply(
      at::TensorList(in), static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(&ops)),
      static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(&m)), links.input_relu,
      links.output_grad_through_relu);
}

}  // namespace workload
