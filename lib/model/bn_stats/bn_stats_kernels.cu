// One thread per channel: a batch norm's statistics from its sums, and its input gradient's
// coefficients; per-channel sums over rows (a convolution output's, a batch norm's backward) in
// two fixed-order stages (lib/model/bn_stats/bn_stats_kernels.h).
#include "lib/model/bn_stats/bn_stats_kernels.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

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
// same on any device (it depends on the shape and, through the load width, on whether the inputs
// are 16-byte aligned, which LibTorch's allocations always are). One for every 64 rows, up to 1024.
constexpr std::int64_t kMaxPartialBlocks = 1024;
constexpr std::int64_t kMinRowsPerBlock = 64;

std::int64_t partial_blocks(std::int64_t rows) {
  return std::clamp<std::int64_t>((rows + kMinRowsPerBlock - 1) / kMinRowsPerBlock, 1,
                                  kMaxPartialBlocks);
}

// V halves of a row, loaded at once: 16 bytes (V = 8) where the row's channels and every input's
// alignment allow it, else a half2 (V = 2).
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

// What a pass sums per channel over the rows of fp16 matrices of one shape: Op::kSums sums, the
// constants of a chunk of V channels (loaded once, before its rows), one row's loads, and how they
// add to the sums, in row order.

// A convolution output's sums: y and y * y.
template <int V>
struct SquareSums {
  static constexpr int kSums = 2;
  const __half* y;
  struct Row {
    Halves<V> y;
  };
  struct Chunk {};
  __device__ Chunk chunk(std::int64_t /*c0*/) const { return {}; }
  __device__ Row load(std::int64_t at) const { return {load_halves<V>(y + at)}; }
  __device__ static void add(const Row& r, const Chunk& /*k*/, float (&acc)[kSums][V]) {
    const auto* pairs = reinterpret_cast<const __half2*>(&r.y.raw);
#pragma unroll
    for (int k = 0; k < V / 2; ++k) {
      const float2 v = __half22float2(pairs[k]);
      acc[0][2 * k] += v.x;
      acc[0][2 * k + 1] += v.y;
      acc[1][2 * k] += v.x * v.x;
      acc[1][2 * k + 1] += v.y * v.y;
    }
  }
};

// A batch norm's backward sums, for X batch norms whose outputs were added (so one dz is the
// gradient of each): dz, then dz * (x_i - mean_i) for each.
template <int V, int X>
struct GradSums {
  static constexpr int kSums = 1 + X;
  const __half* dz;
  const __half* x[X];
  const float* mean[X];
  struct Row {
    Halves<V> dz;
    Halves<V> x[X];
  };
  struct Chunk {
    float mean[X][V];
  };
  __device__ Chunk chunk(std::int64_t c0) const {
    Chunk k;
#pragma unroll
    for (int i = 0; i < X; ++i) {
#pragma unroll
      for (int j = 0; j < V; ++j) k.mean[i][j] = mean[i][c0 + j];
    }
    return k;
  }
  __device__ Row load(std::int64_t at) const {
    Row r;
    r.dz = load_halves<V>(dz + at);
#pragma unroll
    for (int i = 0; i < X; ++i) r.x[i] = load_halves<V>(x[i] + at);
    return r;
  }
  __device__ static void add(const Row& r, const Chunk& k, float (&acc)[kSums][V]) {
    const auto* d = reinterpret_cast<const __half2*>(&r.dz.raw);
#pragma unroll
    for (int j = 0; j < V / 2; ++j) {
      const float2 g = __half22float2(d[j]);
      acc[0][2 * j] += g.x;
      acc[0][2 * j + 1] += g.y;
#pragma unroll
      for (int i = 0; i < X; ++i) {
        const float2 v = __half22float2(reinterpret_cast<const __half2*>(&r.x[i].raw)[j]);
        acc[1 + i][2 * j] += g.x * (v.x - k.mean[i][2 * j]);
        acc[1 + i][2 * j + 1] += g.y * (v.y - k.mean[i][2 * j + 1]);
      }
    }
  }
};

// Stage 1: block b sums rows [b * rows_per_block, ...) of each channel into partial[s][b][c], for
// each of Op's sums s. A thread takes V channels (one load an input); when a row has fewer such
// chunks than the block has threads, `groups` threads share a chunk, each taking every groups-th
// row, and their sums are added in group order through shared memory. Each thread adds its rows
// in row order; four rows' loads are issued before their additions, so that enough bytes are in
// flight to keep the memory busy.
template <int V, class Op>
__global__ void channel_partials(Op op, std::int64_t rows, std::int64_t channels,
                                 std::int64_t rows_per_block, float* partial) {
  constexpr int kSums = Op::kSums;
  extern __shared__ float shared[];
  const std::int64_t chunks = channels / V;
  const int lanes = static_cast<int>(chunks < blockDim.x ? chunks : blockDim.x);
  const int groups = static_cast<int>(blockDim.x) / lanes;
  const int lane = static_cast<int>(threadIdx.x) % lanes;
  const int group = static_cast<int>(threadIdx.x) / lanes;
  const std::int64_t first = blockIdx.x * rows_per_block;
  const std::int64_t last = first + rows_per_block < rows ? first + rows_per_block : rows;
  const auto out = [&](int s, std::int64_t c) -> float& {
    return partial[(static_cast<std::int64_t>(s) * gridDim.x + blockIdx.x) * channels + c];
  };
  // The threads past lanes * groups (where lanes does not divide the block) take no rows.
  const bool active = group < groups;
  for (std::int64_t chunk = lane; active && chunk < chunks; chunk += lanes) {
    float acc[kSums][V] = {};
    const std::int64_t c0 = chunk * V;
    const typename Op::Chunk k = op.chunk(c0);
    std::int64_t r = first + group;
    for (; r + 3 * groups < last; r += 4 * groups) {
      const typename Op::Row h0 = op.load(r * channels + c0);
      const typename Op::Row h1 = op.load((r + groups) * channels + c0);
      const typename Op::Row h2 = op.load((r + 2 * groups) * channels + c0);
      const typename Op::Row h3 = op.load((r + 3 * groups) * channels + c0);
      Op::add(h0, k, acc);
      Op::add(h1, k, acc);
      Op::add(h2, k, acc);
      Op::add(h3, k, acc);
    }
    for (; r < last; r += groups) Op::add(op.load(r * channels + c0), k, acc);
#pragma unroll
    for (int s = 0; s < kSums; ++s) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        if (groups == 1) {
          out(s, c0 + j) = acc[s][j];
        } else {  // here chunks == lanes: one chunk a thread
          shared[(s * groups + group) * channels + c0 + j] = acc[s][j];
        }
      }
    }
  }
  if (groups == 1) return;
  __syncthreads();
  if (group != 0) return;
  for (std::int64_t c = V * lane; c < V * lane + V; ++c) {
    for (int s = 0; s < kSums; ++s) {
      float t = 0;
      for (int g = 0; g < groups; ++g) t += shared[(s * groups + g) * channels + c];
      out(s, c) = t;
    }
  }
}

// Stage 2: a block of kTotalsThreads x kTotalsThreads takes kTotalsThreads channels (x, adjacent
// in memory); thread y adds the partial sums of blocks y, y + kTotalsThreads, ... in that order,
// in double, and thread y = 0 then adds the threads' totals in y order. Sum s goes to out[s],
// times scale[s] per channel where that is given; the first sum to first_again too, where given.
constexpr int kTotalsThreads = 32;

template <int S>
struct Totals {
  float* out[S];
  const float* scale[S];
  float* first_again;
};

template <int S>
__global__ void channel_totals(const float* partial, std::int64_t blocks, std::int64_t channels,
                               Totals<S> t) {
  __shared__ double of[S][kTotalsThreads][kTotalsThreads];
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(kTotalsThreads) + threadIdx.x;
  double acc[S] = {};
  if (c < channels) {
    for (std::int64_t b = threadIdx.y; b < blocks; b += kTotalsThreads) {
#pragma unroll
      for (int s = 0; s < S; ++s) acc[s] += partial[(s * blocks + b) * channels + c];
    }
  }
#pragma unroll
  for (int s = 0; s < S; ++s) of[s][threadIdx.y][threadIdx.x] = acc[s];
  __syncthreads();
  if (threadIdx.y != 0 || c >= channels) return;
#pragma unroll
  for (int s = 0; s < S; ++s) {
    double total = 0;
    for (int y = 0; y < kTotalsThreads; ++y) total += of[s][y][threadIdx.x];
    const auto v = static_cast<float>(total);
    const float result = t.scale[s] != nullptr ? v * t.scale[s][c] : v;
    t.out[s][c] = result;
    if (s == 0 && t.first_again != nullptr) t.first_again[c] = result;
  }
}

// The two stages of Op over `rows` rows, into `totals`.
template <int V, class Op>
void launch_sums(const Op& op, std::int64_t rows, std::int64_t channels, float* partial,
                 const Totals<Op::kSums>& totals, cudaStream_t stream) {
  const std::int64_t n_blocks = partial_blocks(rows);
  const std::int64_t rows_per_block = (rows + n_blocks - 1) / n_blocks;
  const std::int64_t lanes = std::min<std::int64_t>(channels / V, kThreads);
  const std::int64_t groups = kThreads / lanes;
  const std::size_t shared = groups > 1 ? Op::kSums * groups * channels * sizeof(float) : 0;
  channel_partials<V, Op><<<static_cast<unsigned>(n_blocks), kThreads, shared, stream>>>(
      op, rows, channels, rows_per_block, partial);
  WORKLOAD_CUDA_CHECK(cudaGetLastError());
  const auto total_blocks = static_cast<unsigned>((channels + kTotalsThreads - 1) / kTotalsThreads);
  channel_totals<Op::kSums><<<total_blocks, dim3(kTotalsThreads, kTotalsThreads), 0, stream>>>(
      partial, n_blocks, channels, totals);
  WORKLOAD_CUDA_CHECK(cudaGetLastError());
}

// 16-byte loads where every row's chunk of 8 channels is 16-byte aligned in each input.
bool wide_loads(std::int64_t channels, std::initializer_list<const void*> inputs) {
  if (channels % 8 != 0) return false;
  for (const void* p : inputs) {
    if (p != nullptr && reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

template <int V>
SquareSums<V> square_sums(const ChannelSumsArgs& a) {
  return {static_cast<const __half*>(a.y)};
}

template <int V, int X>
GradSums<V, X> grad_sums(const BnBackwardSumsArgs& a) {
  GradSums<V, X> op{static_cast<const __half*>(a.dz), {}, {}};
  for (int i = 0; i < X; ++i) {
    op.x[i] = static_cast<const __half*>(a.bn[i].x);
    op.mean[i] = a.bn[i].mean;
  }
  return op;
}

template <int X>
void launch_grad_sums(const BnBackwardSumsArgs& a, cudaStream_t stream) {
  Totals<1 + X> totals{};
  totals.out[0] = a.bn[0].dbias;
  if (X == 2) totals.first_again = a.bn[1].dbias;
  for (int i = 0; i < X; ++i) {
    totals.out[1 + i] = a.bn[i].dweight;
    totals.scale[1 + i] = a.bn[i].invstd;
  }
  if (wide_loads(a.channels, {a.dz, a.bn[0].x, X == 2 ? a.bn[1].x : nullptr})) {
    launch_sums<8>(grad_sums<8, X>(a), a.rows, a.channels, a.partial, totals, stream);
  } else {
    launch_sums<2>(grad_sums<2, X>(a), a.rows, a.channels, a.partial, totals, stream);
  }
}

}  // namespace

std::int64_t channel_sums_workspace(std::int64_t rows, std::int64_t channels) {
  return 2 * partial_blocks(rows) * channels;
}

void launch_channel_sums(const ChannelSumsArgs& a, cudaStream_t stream) {
  if (a.channels <= 0) return;
  const Totals<2> totals{{a.sum, a.sqsum}, {nullptr, nullptr}, nullptr};
  if (wide_loads(a.channels, {a.y})) {
    launch_sums<8>(square_sums<8>(a), a.rows, a.channels, a.partial, totals, stream);
  } else {
    launch_sums<2>(square_sums<2>(a), a.rows, a.channels, a.partial, totals, stream);
  }
}

std::int64_t bn_backward_sums_workspace(std::int64_t rows, std::int64_t channels) {
  return 3 * partial_blocks(rows) * channels;
}

void launch_bn_backward_sums(const BnBackwardSumsArgs& a, cudaStream_t stream) {
  if (a.channels <= 0) return;
  if (a.bn_count == 2) {
    launch_grad_sums<2>(a, stream);
  } else {
    launch_grad_sums<1>(a, stream);
  }
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
