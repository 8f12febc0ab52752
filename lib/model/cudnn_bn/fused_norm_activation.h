// The model's normalisation on cuDNN's fused batch-norm kernels (--fused-bn): BatchNorm modules
// applied through one autograd function per call, BN+ReLU and BN+add+ReLU fused.
#pragma once

#include <torch/nn/modules/batchnorm.h>
#include <torch/types.h>

#include <memory>

#include "lib/model/cudnn_bn/batch_norm_ex.h"
#include "lib/model/norm_activation.h"

namespace workload::cudnn_bn {

/// Whether `bn` applied to `x` (with a residual for kBnAddRelu) can run on cuDNN's kernels: a
/// training-mode module with affine parameters, running statistics and a momentum (not a
/// cumulative average), float parameters, an eps cuDNN accepts; a 4-D CUDA input of float, half or
/// bfloat16 (C a multiple of 4 for the add) of a shape cuDNN's size queries accept. Where not, the
/// caller runs the modules.
bool fusable(const torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x, BnOps ops);

/// `ops` applied with `bn`'s parameters and buffers through cuDNN, differentiable in x, z, weight
/// and bias: batch_norm_forward in forward, batch_norm_backward in backward. Increments
/// bn.num_batches_tracked as the module's forward does. `x` and `z` are made
/// channels_last-contiguous first if they are not; `z` is cast to x's dtype. Precondition:
/// fusable(bn, x, ops).
torch::Tensor fused_batch_norm(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x,
                               const torch::Tensor& z, BnOps ops);

/// workload::fused_norm_activation()'s implementation.
std::shared_ptr<const NormActivation> make_fused_norm_activation();

}  // namespace workload::cudnn_bn
