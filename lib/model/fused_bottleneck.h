// A bottleneck block's training forward and backward written in the pieces of ConvBnOps
// (lib/model/conv_bn_ops.h): each convolution applies the previous batch norm and ReLU to its input
// and sums its output for the next one, so no pass over the activations does a batch norm alone
// (issue 45). One autograd node for the block.
#pragma once

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/types.h>

#include "lib/model/conv_bn_ops.h"
#include "lib/model/weight_cast.h"

namespace workload {

/// A bottleneck's modules, as the block holds them (not owned): three convolutions with their
/// batch norms, and the shortcut's convolution and batch norm when it has one (else null).
struct BottleneckModules {
  torch::nn::Conv2dImpl* conv1 = nullptr;
  torch::nn::Conv2dImpl* conv2 = nullptr;
  torch::nn::Conv2dImpl* conv3 = nullptr;
  torch::nn::BatchNorm2dImpl* bn1 = nullptr;
  torch::nn::BatchNorm2dImpl* bn2 = nullptr;
  torch::nn::BatchNorm2dImpl* bn3 = nullptr;
  torch::nn::Conv2dImpl* downsample_conv = nullptr;
  torch::nn::BatchNorm2dImpl* downsample_bn = nullptr;
};

/// How a fused block's backward meets its neighbours': the ReLU between two blocks has its
/// gradient applied once, in the later block's input gradient (cuDNN's data-gradient epilogue),
/// where each block would otherwise pass over the whole gradient for it.
struct ReluLinks {
  /// The block's input is a ReLU's output that only this block reads (every block's but the
  /// network's first): x's gradient is returned through that ReLU, zero where x is 0. Whatever
  /// reads it next applies the same ReLU's backward again, or leaves it out (the next field).
  bool input_relu = false;
  /// The block's output goes only to a fused block with input_relu: the gradient it gets back is
  /// already through the block's last ReLU, whose backward is then not applied again.
  bool output_grad_through_relu = false;
};

/// Whether fused_bottleneck() computes what the modules would: every batch norm training, with
/// affine weights, a momentum (not the cumulative average) and tracked running statistics, and
/// every convolution without bias, dilation or groups. Otherwise the block runs its modules.
bool fusable(const BottleneckModules& m);

/// relu(bn3(conv3(relu(bn2(conv2(relu(bn1(conv1(x))))))) + shortcut(x)) in training mode, through
/// `ops`, with the weights cast to x's dtype: the same values as the modules within rounding, the
/// running statistics and num_batches_tracked updated as BatchNorm2d's forward updates them (the
/// counters through DeferredBatchCounts where one collects). Each convolution's weight is the one
/// `w` gives: the low-precision copy the forward made of it with the model's others (one cast
/// kernel each way for all of them, where a cast of its own per weight would launch two), or the
/// module's own. Backward is one node: the gradients of x, of the weights it used and of the batch
/// norms' weights and biases, each in its input's dtype; x's through the ReLU before the block
/// where `links` says so.
/// \pre fusable(m).
torch::Tensor fused_bottleneck(const ConvBnOps& ops, const BottleneckModules& m,
                               const torch::Tensor& x, const ForwardWeights& w = {},
                               ReluLinks links = {});

}  // namespace workload
