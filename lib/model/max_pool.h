// A max pool for the stem: LibTorch's values and gradients, with the argmax kept in one byte per
// output value on CUDA channels-last tensors (max_pool/), where LibTorch's kernels keep an int64
// index and its channels-last backward takes several times a memory pass (1.8 ms a step at batch
// 256 on an H100, docs/BENCHMARKS.md, issue 45). The stem pools with it
// (ResNet50Impl::forward_impl); tests/lib/model/max_pool_test.cpp holds it to LibTorch bit for bit.
#pragma once

#include <torch/nn/options/pooling.h>
#include <torch/types.h>

namespace workload {

/// Whether max_pool2d() runs this build's kernels (max_pool/) for `x`: built with them, a CUDA,
/// 4-d, channels-last contiguous tensor of fp32, fp16 or bf16, a square window of at most 15 with
/// equal strides and paddings (the padding at most half the window), no dilation, no ceil mode,
/// and a non-empty output.
bool max_pool_kernels_take(const torch::Tensor& x, const torch::nn::MaxPool2dOptions& options);

/// torch::max_pool2d(x, options): on max_pool_kernels_take()'s tensors this build's kernels, the
/// same values bit for bit (the first maximum of a window in row-major order, NaN where the window
/// holds one) and the same input gradient (each window's gradient to its argmax, summed in fp32 in
/// the windows' row-major order), in channels-last; otherwise LibTorch's. With grad mode off or `x`
/// not requiring grad, no argmax is kept. One case may differ: a window whose values are all -inf
/// passes its gradient to no input (LibTorch's has no maximum to name there). Thread-safe as
/// LibTorch's operators are; the kernels run on the current stream (a CUDA graph captures them).
torch::Tensor max_pool2d(const torch::Tensor& x, const torch::nn::MaxPool2dOptions& options);

}  // namespace workload
