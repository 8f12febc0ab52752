// BatchNorm2d modules applied through cuDNN's fused batch-norm kernels (--fused-bn), one autograd
// function per call: BN, BN+ReLU and BN+add+ReLU. lib/model/norm_activation.cpp builds the model's
// normalisation (NormActivation) on these; this folder does not know that interface.
#pragma once

#include <torch/nn/modules/batchnorm.h>
#include <torch/types.h>

#include "lib/model/cudnn_bn/batch_norm_ex.h"

namespace workload::cudnn_bn {

/// Whether `bn` applied to `x` (with a residual for kBnAddRelu) can run on cuDNN's kernels: a
/// training-mode module with affine parameters, running statistics and a momentum (not a
/// cumulative average), float parameters, an eps cuDNN accepts; a 4-D CUDA input of float, half or
/// bfloat16 (C a multiple of 4 for the add) of a shape cuDNN's size queries accept. Where not, the
/// caller runs the modules.
bool fusable(const torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x, BnOps ops);

/// `ops` applied with `bn`'s parameters and buffers through cuDNN, differentiable in x, z, weight
/// and bias: batch_norm_forward in forward, batch_norm_backward in backward. Does not touch
/// bn.num_batches_tracked: the caller counts the call, as the module's forward would. `x` and `z`
/// are made channels_last-contiguous first if they are not; `z` is cast to x's dtype. Precondition:
/// fusable(bn, x, ops).
torch::Tensor fused_batch_norm(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x,
                               const torch::Tensor& z, BnOps ops);

}  // namespace workload::cudnn_bn
