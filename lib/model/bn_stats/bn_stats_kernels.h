// A training batch norm's per-channel arithmetic in one kernel each, for the fused bottleneck on
// cuDNN's engines (lib/model/cudnn_conv_bn_ops.cpp): the statistics finalised from the
// convolution's sums, the coefficients of the input's gradient from the BN's weight and bias
// gradients, the weight and bias gradients of the BNs no convolution follows, and
// (--deterministic) a convolution output's sums in a fixed order. The reference
// (lib/model/conv_bn_ops.cpp) computes them in about twenty and ten of LibTorch's elementwise
// kernels of a few microseconds each: 53 batch norms made them about 1,600 of a step's 2,000
// launches (docs/BENCHMARKS.md, issue 45). Raw pointers to fp32 vectors of `channels` values on the
// device; each launch is asynchronous on `stream`, and an error raised at launch is thrown. Built
// where LibTorch carries CUDA, cuDNN 9 and nvcc are found (WORKLOAD_HAVE_BN_STATS_KERNELS).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace workload {

/// finalize's inputs and outputs (ConvBnOps::finalize): the sums of `count` values per channel,
/// the layer's weight and bias, its running statistics (updated in place), and the batch's mean,
/// inverse standard deviation, and bn(x) = x * scale + shift.
struct BnFinalizeArgs {
  const float* sum;
  const float* sqsum;
  const float* weight;
  const float* bias;
  float* running_mean;
  float* running_var;
  float* mean;
  float* invstd;
  float* scale;
  float* shift;
  std::int64_t channels;
  std::int64_t count;
  double momentum;
  double eps;
};

/// The statistics in double, as the reference computes them, rounded to fp32; the running ones
/// as PyTorch's BatchNorm updates them (momentum, the unbiased variance).
void launch_bn_finalize(const BnFinalizeArgs& a, cudaStream_t stream);

/// bn_grads_from_sums' coefficients: dx = a * dz + b * x + c per channel, from dweight = sum(dz *
/// xhat), dbias = sum(dz), the batch's mean and invstd and the layer's weight, over `count` values.
struct BnGradCoefficientArgs {
  const float* dweight;
  const float* dbias;
  const float* mean;
  const float* invstd;
  const float* weight;
  float* a;
  float* b;
  float* c;
  std::int64_t channels;
  std::int64_t count;
};

void launch_bn_grad_coefficients(const BnGradCoefficientArgs& g, cudaStream_t stream);

/// Each channel's sum and sum of squares over the `rows` rows of a [rows, channels] fp16 matrix
/// (an NHWC tensor), in fp32, added in the same order every run (an order set by the shape and by
/// whether y is 16-byte aligned): each of a fixed number of blocks sums its own rows (16-byte
/// loads where channels is a multiple of 8 and y 16-byte aligned), then 32 threads per channel add
/// the blocks' partial sums in double, each a fixed share in block order, and one of them their 32
/// totals in thread order.
/// What cuDNN's statistics epilogue (GenStats) computes, whose blocks add theirs with atomics in
/// the order they finish. One read of y.
struct ChannelSumsArgs {
  const void* y;  ///< fp16 (__half), rows x channels, channels contiguous and even, 4-byte aligned
  std::int64_t rows;
  std::int64_t channels;
  float* sum;
  float* sqsum;
  float* partial;  ///< workspace of channel_sums_workspace(rows, channels) floats
};

/// The floats launch_channel_sums needs as its workspace.
std::int64_t channel_sums_workspace(std::int64_t rows, std::int64_t channels);

void launch_channel_sums(const ChannelSumsArgs& s, cudaStream_t stream);

/// A batch norm's weight and bias gradients from its input x and the gradient of its output dz,
/// fp16 [rows, channels] matrices (NHWC) of one shape: dbias = sum(dz) and dweight = invstd *
/// sum(dz * (x - mean)) per channel, what ATen's batch_norm_backward_reduce returns as
/// grad_bias and grad_weight. The sums in fp32, added in launch_channel_sums' fixed order (the same
/// bits every run). With bn_count 2, the second BN is one whose output was added to the first's,
/// so that dz is the gradient of both (a block's last BN and its shortcut's): its gradients too,
/// dz read once (its dbias holds the first's values). One read of dz and of each x.
struct BnBackwardSumsArgs {
  struct Bn {
    const void* x;  ///< fp16 (__half), the BN's input, rows x channels
    const float* mean;
    const float* invstd;
    float* dweight;
    float* dbias;
  };
  const void*
      dz;  ///< fp16, rows x channels; dz and each x contiguous, channels even, 4-byte aligned
  std::int64_t rows;
  std::int64_t channels;
  int bn_count;  ///< 1 or 2: the BNs of bn[] that dz is the gradient of
  Bn bn[2];
  float* partial;  ///< workspace of bn_backward_sums_workspace(rows, channels) floats
};

/// The floats launch_bn_backward_sums needs as its workspace (for one BN or two).
std::int64_t bn_backward_sums_workspace(std::int64_t rows, std::int64_t channels);

void launch_bn_backward_sums(const BnBackwardSumsArgs& a, cudaStream_t stream);

}  // namespace workload
