// The stem's max pool on channels-last tensors with the window's argmax kept as one byte per
// output value, where LibTorch keeps an int64 index: at batch 400 the 3x3/2 pool over 112x112x64
// saves 642 MB of indices a step and writes 80 MB. The backward gathers each input's gradient
// from the windows that hold it, in LibTorch's order, so both directions return LibTorch's values
// bit for bit (lib/model/max_pool.h). Raw device pointers, NHWC contiguous; each launch is
// asynchronous on `stream`, and an error raised at launch is thrown. Built where LibTorch carries
// CUDA and nvcc is found (WORKLOAD_HAVE_MAX_POOL_KERNELS).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace workload {

/// The pool's geometry: a square window of `kernel` (at most kMaxPoolKernel), no dilation, no
/// ceil mode; output sizes as LibTorch's: (in + 2 pad - kernel) / stride + 1.
struct MaxPoolGeometry {
  std::int64_t batch;
  std::int64_t channels;
  std::int64_t in_h;
  std::int64_t in_w;
  std::int64_t out_h;
  std::int64_t out_w;
  int kernel;
  int stride;
  int pad;
};

/// The largest window whose positions fit a byte beside kNoArgmax.
constexpr int kMaxPoolKernel = 15;
/// The argmax of a window whose values are all -inf: no input receives its gradient.
constexpr std::uint8_t kNoArgmax = 255;

enum class PoolDtype { kFloat, kHalf, kBFloat16 };

/// y = the window's maximum, NaN where the window holds one (LibTorch's rule: the first maximum in
/// row-major order, the last NaN); argmax (nullptr: not written) = its position in the window,
/// row * kernel + column.
void launch_max_pool_forward(const void* x, void* y, std::uint8_t* argmax, const MaxPoolGeometry& g,
                             PoolDtype dtype, cudaStream_t stream);

/// dx (in_h x in_w, every value written) = the sum, in fp32, of dy over the windows whose argmax is
/// that input, the windows in row-major order, rounded once to dx's type.
void launch_max_pool_backward(const void* dy, const std::uint8_t* argmax, void* dx,
                              const MaxPoolGeometry& g, PoolDtype dtype, cudaStream_t stream);

}  // namespace workload
