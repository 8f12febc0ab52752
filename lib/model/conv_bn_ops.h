// The pieces a bottleneck block is made of when its convolutions carry the batch norms around them
// (issue 45): a convolution that applies the previous BN and ReLU to its input and sums its output
// per channel, the BN's statistics finalised from those sums, and the backward's data gradient
// through ReLU into the BN's gradients. One interface, two implementations: LibTorch's operations
// (any device and dtype: the reference the tests hold the other to) and cuDNN's fused engines
// (fp16, NHWC, on a GPU).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <utility>

namespace workload {

/// A 2-D convolution's symmetric padding and stride (dilation 1, one group, no bias).
struct ConvSpec {
  std::int64_t pad = 0;
  std::int64_t stride = 1;
};

/// What a convolution applies to its input first: relu(x * scale + bias), per channel ([C], fp32).
/// The previous batch norm and its ReLU, folded into one scale and one bias.
struct Prologue {
  torch::Tensor scale;
  torch::Tensor bias;
};

/// A convolution's output and its per-channel sum and sum of squares (fp32, [K]).
struct ConvStats {
  torch::Tensor y;
  torch::Tensor sum;
  torch::Tensor sqsum;
};

/// A training batch norm's statistics from its input's sums: the batch mean and inverse standard
/// deviation (what backward needs), and bn(x) = x * scale + bias with the layer's weight and bias
/// folded in (what the next prologue or the block's output applies). All fp32, [C].
struct BnFinal {
  torch::Tensor mean;
  torch::Tensor invstd;
  torch::Tensor scale;
  torch::Tensor bias;
};

/// A batch norm's backward from the gradient of its output, dz: its weight's and bias's gradients,
/// and the coefficients of its input's gradient, dx = a * dz + b * x + c per channel (fp32, [C]).
struct BnGrads {
  torch::Tensor dz;  ///< the gradient of the BN's output (after ReLU's gradient), x's dtype
  torch::Tensor dweight;
  torch::Tensor dbias;
  torch::Tensor a, b, c;
};

/// What a batch norm's backward reads besides the gradient of its output: its input x, its batch
/// statistics and its weight.
struct BnInput {
  torch::Tensor x;
  BnFinal stats;
  torch::Tensor weight;
};

/// A BN's gradients from its batch's sums, `dbias` = sum(dz) and `dweight` = sum(dz * xhat) over
/// the `count` values of each channel: the coefficients of x's gradient follow from them (fp32).
BnGrads bn_grads_from_sums(const torch::Tensor& dz, torch::Tensor dweight, torch::Tensor dbias,
                           const BnFinal& bn_final, const torch::Tensor& weight,
                           std::int64_t count);

/// The pieces. Every tensor of activations is NCHW-shaped and laid out as its input is (channels
/// last in the model); sums, statistics and coefficients are fp32 vectors. Thread-safety: an
/// implementation is used from the training thread (and autograd's, in backward), never from two
/// at once.
class ConvBnOps {
 public:
  virtual ~ConvBnOps() = default;

  /// y = conv(prologue ? relu(x * scale + bias) : x, w), and y's sums per channel.
  virtual ConvStats conv_stats(const torch::Tensor& x, const torch::Tensor& w, ConvSpec spec,
                               const std::optional<Prologue>& prologue) const = 0;

  /// The batch statistics of `count` values per channel from their sums, folded with `weight` and
  /// `bias` (eps as BatchNorm's); running_mean and running_var updated in place as PyTorch's
  /// BatchNorm does (momentum, the unbiased variance).
  virtual BnFinal finalize(const torch::Tensor& sum, const torch::Tensor& sqsum, std::int64_t count,
                           const torch::Tensor& weight, const torch::Tensor& bias,
                           torch::Tensor& running_mean, torch::Tensor& running_var, double momentum,
                           double eps) const = 0;

  /// The gradient of conv's input, of `x_sizes`, from dy.
  virtual torch::Tensor dgrad(const torch::Tensor& dy, const torch::Tensor& w, ConvSpec spec,
                              at::IntArrayRef x_sizes) const = 0;

  /// A block's input gradient, its two paths summed: dgrad(dy, w) + r, with r the other path's
  /// gradient, of the input's sizes. Where `relu_out` is defined (the block's input, a ReLU's
  /// output), the sum goes on through that ReLU's backward: zero where relu_out is not positive.
  virtual torch::Tensor dgrad_add(const torch::Tensor& dy, const torch::Tensor& w, ConvSpec spec,
                                  const torch::Tensor& r, const torch::Tensor& relu_out) const = 0;

  /// The gradient of conv's weight, of `w_sizes`, from dy, its input recomputed as conv_stats
  /// applied it (the prologue on x).
  virtual torch::Tensor wgrad(const torch::Tensor& x, const torch::Tensor& dy, ConvSpec spec,
                              at::IntArrayRef w_sizes,
                              const std::optional<Prologue>& prologue) const = 0;

  /// A BN whose output went through ReLU into a convolution: dz = dgrad(dy, w) where
  /// relu(bn(x)) > 0, else 0 (bn as `bn_final` folds it), then the BN's gradients and the
  /// coefficients of x's gradient. x is the BN's input (the convolution's input before the
  /// prologue), `weight` the BN's.
  virtual BnGrads dgrad_drelu_bn(const torch::Tensor& dy, const torch::Tensor& w, ConvSpec spec,
                                 const torch::Tensor& x, const BnFinal& bn_final,
                                 const torch::Tensor& weight) const = 0;

  /// The same BN gradients from a dz given (the block's last BN, whose ReLU follows the add).
  virtual BnGrads bn_grads(const torch::Tensor& dz, const torch::Tensor& x, const BnFinal& bn_final,
                           const torch::Tensor& weight) const = 0;

  /// bn_grads of two BNs whose outputs were added, so that dz is the gradient of both (a block's
  /// last BN and its shortcut's): each one's as bn_grads gives it. Here bn_grads twice; an
  /// implementation may read dz once for both.
  virtual std::pair<BnGrads, BnGrads> bn_grads_pair(const torch::Tensor& dz, const BnInput& first,
                                                    const BnInput& second) const;

  /// dx = a * dz + b * x + c, per channel, in x's dtype.
  virtual torch::Tensor dbn_apply(const BnGrads& g, const torch::Tensor& x) const = 0;

  /// The block's output: relu(y * bn.scale + bn.bias + residual), the residual either as given
  /// (identity) or through its own BN, relu(... + r * res_bn.scale + res_bn.bias).
  virtual torch::Tensor output(const torch::Tensor& y, const BnFinal& bn, const torch::Tensor& r,
                               const BnFinal* res_bn) const = 0;
};

/// The pieces in LibTorch's operations: any device, any floating dtype (the convolutions in x's
/// dtype, the sums and statistics in fp32). What the fused engines are tested against.
const ConvBnOps& reference_conv_bn_ops();

/// How the sums a batch norm needs are added on cuDNN's fused engines.
enum class SumOrder {
  /// The engines' own: the convolution's statistics epilogue and the BN's backward-weights node,
  /// whose thread blocks add their shares in whatever order they finish. Two runs of the same
  /// inputs differ in the last bits of most channels' sums (measured on an H100, cuDNN 9.19, where
  /// the engines carry no nondeterministic note), so training runs drift apart from the first step.
  kEngines,
  /// In a fixed order: the convolution's output summed again by a two-stage kernel (bn_stats/),
  /// the BN's gradients from the engine's dz by another (where nvcc built them; else ATen's
  /// reductions, batch_norm_backward_reduce for the gradients). The same bits every run, for one
  /// more read of each convolution's output and of each BN's input and dz.
  kOrdered,
};

/// The pieces on cuDNN's fused engines where they take the inputs (fp16, channels last, on a GPU):
/// the convolution with its prologue and sums, the weight gradient with its prologue, the data
/// gradient through ReLU into the BN's gradients, dBNApply, the block's output and its input's
/// gradient with the shortcut's added in the data gradient's epilogue. The last BN's gradients
/// run in one reduction, a two-stage kernel in a fixed order (bn_stats/, where nvcc built it; with
/// the shortcut's BN in the same read of dz, bn_grads_pair), else on cuDNN where an engine takes
/// them alone, else in ATen's batch_norm_backward_reduce. The statistics, and any input or shape
/// no engine takes, run on the reference pieces (a shape that falls back is said once on stderr,
/// with cuDNN's reason).
/// Each plan is built at its shape's first call, on the first engine that builds among those
/// cuDNN does not mark nondeterministic, else on any (said once on stderr); `order` is how the
/// sums are added. Null in a build without cuDNN 9's graph API (lib/core/build_features.h).
const ConvBnOps* cudnn_conv_bn_ops(SumOrder order = SumOrder::kEngines);

}  // namespace workload
