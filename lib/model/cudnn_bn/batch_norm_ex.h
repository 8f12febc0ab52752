// cuDNN's NHWC batch norm with its fused operations, training mode, on LibTorch tensors: one
// forward and one backward call each (cudnnBatchNormalization{ForwardTraining,Backward}Ex).
#pragma once

#include <ATen/Tensor.h>

namespace workload::cudnn_bn {

/// What one call computes after the normalisation.
enum class BnOps {
  kBn,         ///< y = bn(x)
  kBnRelu,     ///< y = relu(bn(x))
  kBnAddRelu,  ///< y = relu(bn(x) + z); backward also returns dz
};

/// What forward returns: the output, the batch statistics and cuDNN's reserve space (all three
/// needed, unchanged, by backward).
struct BnForward {
  at::Tensor y;             ///< like x (dtype, channels_last)
  at::Tensor save_mean;     ///< float [C]
  at::Tensor save_inv_var;  ///< float [C]: 1 / sqrt(var + eps), biased variance
  at::Tensor reserve;       ///< bytes, possibly empty
};

/// The gradients backward returns.
struct BnBackward {
  at::Tensor dx, dz;  ///< like x; dz only for kBnAddRelu
  at::Tensor dweight, dbias;
};

/// Whether cuDNN's size queries accept `ops` on a channels_last tensor of x's shape and dtype (4-D,
/// CUDA, float, half or bfloat16), asked once per shape and remembered. Any thread.
bool cudnn_accepts(const at::Tensor& x, BnOps ops);

/// Batch-norm forward in training mode on the current CUDA stream, in cuDNN's
/// CUDNN_BATCHNORM_SPATIAL_PERSISTENT mode. `x` (and `z` for kBnAddRelu, else undefined) are 4-D,
/// channels_last-contiguous, float, half or bfloat16, of one dtype and shape; `weight`, `bias`,
/// `running_mean` and `running_var` are float [C], on x's device. The running statistics are
/// updated in place as PyTorch's BatchNorm does: r = (1 - momentum) r + momentum s, the variance
/// unbiased. Any thread; the call is asynchronous. \throws std::invalid_argument (c10::Error) for
/// inputs outside those terms, std::runtime_error naming the cuDNN call that failed.
BnForward batch_norm_forward(const at::Tensor& x, const at::Tensor& z, const at::Tensor& weight,
                             const at::Tensor& bias, const at::Tensor& running_mean,
                             const at::Tensor& running_var, double momentum, double eps, BnOps ops);

/// The matching backward: `x`, `weight`, `bias`, `eps`, `ops` as given to forward and what it
/// returned (`saved.y` may be undefined for kBn); `dy` like x. The parameter gradients are written,
/// not accumulated. Any thread; asynchronous. \throws as batch_norm_forward.
BnBackward batch_norm_backward(const at::Tensor& x, const at::Tensor& dy, const at::Tensor& weight,
                               const at::Tensor& bias, const BnForward& saved, double eps,
                               BnOps ops);

}  // namespace workload::cudnn_bn
