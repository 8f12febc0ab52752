// One thread per channel: a batch norm's statistics from its sums, and its input gradient's
// coefficients (lib/model/bn_stats/bn_stats_kernels.h).
#include "lib/model/bn_stats/bn_stats_kernels.h"

#include "common/cuda_check.h"

namespace workload {
namespace {

constexpr int kThreads = 256;

unsigned blocks(std::int64_t channels) {
  return static_cast<unsigned>((channels + kThreads - 1) / kThreads);
}

// In double, as the reference: E[y^2] - E[y]^2 cancels in fp32 where a channel's mean outweighs
// its spread. The running statistics in fp32, as LibTorch's mul_ and add_ make them.
__global__ void bn_finalize(BnFinalizeArgs a) {
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (c >= a.channels) return;
  const double m = static_cast<double>(a.count);
  const double mean_d = static_cast<double>(a.sum[c]) / m;
  const double var_d = fmax(static_cast<double>(a.sqsum[c]) / m - mean_d * mean_d, 0.0);
  const float mean = static_cast<float>(mean_d);
  const float var = static_cast<float>(var_d);
  const float invstd = static_cast<float>(rsqrt(var_d + a.eps));
  const float scale = a.weight[c] * invstd;
  a.mean[c] = mean;
  a.invstd[c] = invstd;
  a.scale[c] = scale;
  a.shift[c] = a.bias[c] - mean * scale;
  const float keep = static_cast<float>(1.0 - a.momentum);
  const float take = static_cast<float>(a.momentum);
  const float unbiased = static_cast<float>(a.count > 1 ? m / (m - 1) : 1.0);
  a.running_mean[c] = a.running_mean[c] * keep + take * mean;
  a.running_var[c] = a.running_var[c] * keep + take * (var * unbiased);
}

// dx = weight * invstd / M * (M dz - dbias - xhat dweight) = a dz + b x + c, in bn_grads_from_sums'
// order of fp32 operations.
__global__ void bn_grad_coefficients(BnGradCoefficientArgs g) {
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (c >= g.channels) return;
  const float m = static_cast<float>(static_cast<double>(g.count));
  const float w = g.weight[c], invstd = g.invstd[c];
  const float b = -w * invstd * invstd * g.dweight[c] / m;
  g.a[c] = w * invstd;
  g.b[c] = b;
  g.c[c] = -w * invstd * g.dbias[c] / m - b * g.mean[c];
}

}  // namespace

void launch_bn_finalize(const BnFinalizeArgs& a, cudaStream_t stream) {
  if (a.channels <= 0) return;
  bn_finalize<<<blocks(a.channels), kThreads, 0, stream>>>(a);
  WORKLOAD_CUDA_CHECK(cudaGetLastError());
}

void launch_bn_grad_coefficients(const BnGradCoefficientArgs& g, cudaStream_t stream) {
  if (g.channels <= 0) return;
  bn_grad_coefficients<<<blocks(g.channels), kThreads, 0, stream>>>(g);
  WORKLOAD_CUDA_CHECK(cudaGetLastError());
}

}  // namespace workload
