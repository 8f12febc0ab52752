// One thread per channel: a batch norm's statistics from its sums, and its input gradient's
// coefficients; a convolution output's sums in two fixed-order stages
// (lib/model/bn_stats/bn_stats_kernels.h).
#include "lib/model/bn_stats/bn_stats_kernels.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

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

// The partial sums' blocks: a function of the shape only, so the order of the additions is the
// same on any device (it depends on the shape and, through the load width, on whether y is 16-byte
// aligned, which LibTorch's allocations always are). One for every 64 rows, up to 1024.
constexpr std::int64_t kMaxPartialBlocks = 1024;
constexpr std::int64_t kMinRowsPerBlock = 64;

std::int64_t partial_blocks(std::int64_t rows) {
  return std::clamp<std::int64_t>((rows + kMinRowsPerBlock - 1) / kMinRowsPerBlock, 1,
                                  kMaxPartialBlocks);
}

// V halves of a row, loaded at once: 16 bytes (V = 8) where the row's channels and y allow it,
// else a half2 (V = 2).
template <int V>
struct Halves;
template <>
struct Halves<8> {
  uint4 raw;
};
template <>
struct Halves<2> {
  __half2 raw;
};

template <int V>
__device__ __forceinline__ Halves<V> load_halves(const __half* at) {
  return *reinterpret_cast<const Halves<V>*>(at);
}

template <int V>
__device__ __forceinline__ void accumulate(const Halves<V>& h, float (&s)[V], float (&q)[V]) {
  const auto* pairs = reinterpret_cast<const __half2*>(&h.raw);
#pragma unroll
  for (int k = 0; k < V / 2; ++k) {
    const float2 v = __half22float2(pairs[k]);
    s[2 * k] += v.x;
    s[2 * k + 1] += v.y;
    q[2 * k] += v.x * v.x;
    q[2 * k + 1] += v.y * v.y;
  }
}

// Stage 1: block b sums rows [b * rows_per_block, ...) of each channel into partial[b][c] (and
// the squares into partial[blocks + b][c]). A thread takes V channels (one load); when a row has
// fewer such chunks than the block has threads, `groups` threads share a chunk, each taking every
// groups-th row, and their sums are added in group order through shared memory. Each thread adds
// its rows in row order; four rows' loads are issued before their additions, so that enough bytes
// are in flight to keep the memory busy.
template <int V>
__global__ void channel_partials(const __half* y, std::int64_t rows, std::int64_t channels,
                                 std::int64_t rows_per_block, float* partial) {
  extern __shared__ float shared[];
  const std::int64_t chunks = channels / V;
  const int lanes = static_cast<int>(chunks < blockDim.x ? chunks : blockDim.x);
  const int groups = static_cast<int>(blockDim.x) / lanes;
  const int lane = static_cast<int>(threadIdx.x) % lanes;
  const int group = static_cast<int>(threadIdx.x) / lanes;
  const std::int64_t first = blockIdx.x * rows_per_block;
  const std::int64_t last = first + rows_per_block < rows ? first + rows_per_block : rows;
  float* sq_partial = partial + static_cast<std::int64_t>(gridDim.x) * channels;
  // The threads past lanes * groups (where lanes does not divide the block) take no rows.
  const bool active = group < groups;
  for (std::int64_t chunk = lane; active && chunk < chunks; chunk += lanes) {
    float s[V] = {}, q[V] = {};
    const std::int64_t c0 = chunk * V;
    std::int64_t r = first + group;
    for (; r + 3 * groups < last; r += 4 * groups) {
      const Halves<V> h0 = load_halves<V>(y + r * channels + c0);
      const Halves<V> h1 = load_halves<V>(y + (r + groups) * channels + c0);
      const Halves<V> h2 = load_halves<V>(y + (r + 2 * groups) * channels + c0);
      const Halves<V> h3 = load_halves<V>(y + (r + 3 * groups) * channels + c0);
      accumulate<V>(h0, s, q);
      accumulate<V>(h1, s, q);
      accumulate<V>(h2, s, q);
      accumulate<V>(h3, s, q);
    }
    for (; r < last; r += groups) accumulate<V>(load_halves<V>(y + r * channels + c0), s, q);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if (groups == 1) {
        partial[blockIdx.x * channels + c0 + k] = s[k];
        sq_partial[blockIdx.x * channels + c0 + k] = q[k];
      } else {  // here chunks == lanes: one chunk a thread
        shared[group * channels + c0 + k] = s[k];
        shared[(groups + group) * channels + c0 + k] = q[k];
      }
    }
  }
  if (groups == 1) return;
  __syncthreads();
  if (group != 0) return;
  for (std::int64_t c = V * lane; c < V * lane + V; ++c) {
    float s = 0, q = 0;
    for (int g = 0; g < groups; ++g) {
      s += shared[g * channels + c];
      q += shared[(groups + g) * channels + c];
    }
    partial[blockIdx.x * channels + c] = s;
    sq_partial[blockIdx.x * channels + c] = q;
  }
}

// Stage 2: a block of kTotalsThreads x kTotalsThreads takes kTotalsThreads channels (x, adjacent
// in memory); thread y adds the partial sums of blocks y, y + kTotalsThreads, ... in that order,
// in double, and thread y = 0 then adds the threads' totals in y order.
constexpr int kTotalsThreads = 32;

__global__ void channel_totals(const float* partial, std::int64_t blocks, std::int64_t channels,
                               float* sum, float* sqsum) {
  __shared__ double s_of[kTotalsThreads][kTotalsThreads];
  __shared__ double q_of[kTotalsThreads][kTotalsThreads];
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(kTotalsThreads) + threadIdx.x;
  double s = 0, q = 0;
  if (c < channels) {
    for (std::int64_t b = threadIdx.y; b < blocks; b += kTotalsThreads) {
      s += partial[b * channels + c];
      q += partial[(blocks + b) * channels + c];
    }
  }
  s_of[threadIdx.y][threadIdx.x] = s;
  q_of[threadIdx.y][threadIdx.x] = q;
  __syncthreads();
  if (threadIdx.y != 0 || c >= channels) return;
  s = 0;
  q = 0;
  for (int y = 0; y < kTotalsThreads; ++y) {
    s += s_of[y][threadIdx.x];
    q += q_of[y][threadIdx.x];
  }
  sum[c] = static_cast<float>(s);
  sqsum[c] = static_cast<float>(q);
}

template <int V>
void launch_partials(const ChannelSumsArgs& a, std::int64_t n_blocks, std::int64_t rows_per_block,
                     cudaStream_t stream) {
  const std::int64_t lanes = std::min<std::int64_t>(a.channels / V, kThreads);
  const std::int64_t groups = kThreads / lanes;
  const std::size_t shared = groups > 1 ? 2 * groups * a.channels * sizeof(float) : 0;
  channel_partials<V><<<static_cast<unsigned>(n_blocks), kThreads, shared, stream>>>(
      static_cast<const __half*>(a.y), a.rows, a.channels, rows_per_block, a.partial);
  WORKLOAD_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

std::int64_t channel_sums_workspace(std::int64_t rows, std::int64_t channels) {
  return 2 * partial_blocks(rows) * channels;
}

void launch_channel_sums(const ChannelSumsArgs& a, cudaStream_t stream) {
  if (a.channels <= 0) return;
  const std::int64_t n_blocks = partial_blocks(a.rows);
  const std::int64_t rows_per_block = (a.rows + n_blocks - 1) / n_blocks;
  // 16-byte loads where every row's chunk of 8 channels is 16-byte aligned.
  if (a.channels % 8 == 0 && reinterpret_cast<std::uintptr_t>(a.y) % 16 == 0) {
    launch_partials<8>(a, n_blocks, rows_per_block, stream);
  } else {
    launch_partials<2>(a, n_blocks, rows_per_block, stream);
  }
  const auto total_blocks =
      static_cast<unsigned>((a.channels + kTotalsThreads - 1) / kTotalsThreads);
  channel_totals<<<total_blocks, dim3(kTotalsThreads, kTotalsThreads), 0, stream>>>(
      a.partial, n_blocks, a.channels, a.sum, a.sqsum);
  WORKLOAD_CUDA_CHECK(cudaGetLastError());
}

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
