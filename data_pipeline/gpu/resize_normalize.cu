// The resize kernels: the jobs' filter weights computed once into a table, a horizontal pass into
// 8-bit rows, then a vertical pass that also flips, normalises and writes channels-last. The
// weights come from data_pipeline/resize_filter.h, the same arithmetic as the CPU reference.
#include "data_pipeline/gpu/resize_normalize.h"

#include <algorithm>

#include "common/cuda_check.h"
#include "data_pipeline/resize_filter.h"

namespace data_pipeline::gpu {
namespace {

constexpr int kThreads = 256;

// The weight table: for job j, axis a (0: columns, 1: rows) and output index i, the entry at
// ((j * 2 + a) * size + i) * stride holds the first tap, the tap count, then the weights.
__device__ inline const int* entry(const int* taps, int job, int axis, int i, int size,
                                   int stride) {
  return taps + ((static_cast<long>(job) * 2 + axis) * size + i) * stride;
}

// One thread per (job, axis, output index): Pillow's coefficients, in fixed point.
__global__ void weights(const CropJob* jobs, int* taps, int size, int stride) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= 2 * size) return;
  const CropJob job = jobs[blockIdx.y];
  const int axis = t / size, i = t % size;
  const FilterTaps f = filter_taps(i, axis == 0 ? job.width : job.height, size);
  int* e = const_cast<int*>(entry(taps, blockIdx.y, axis, i, size, stride));
  const int count = f.count < stride - 2 ? f.count : stride - 2;  // never more, by max_filter_taps
  e[0] = f.first;
  e[1] = count;
  for (int k = 0; k < count; ++k) e[2 + k] = filter_weight_fixed(f, f.first + k);
}

// One thread per (crop row, output column): Pillow's horizontal pass.
__global__ void horizontal_pass(const CropJob* jobs, const int* taps, int stride,
                                const std::uint8_t* sources, std::uint8_t* scratch, int size) {
  const CropJob job = jobs[blockIdx.y];
  const long t = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int y = static_cast<int>(t / size);
  const int x = static_cast<int>(t % size);
  if (y >= job.height) return;
  const int* e = entry(taps, blockIdx.y, 0, x, size, stride);
  const int first = e[0], count = e[1];
  const std::uint8_t* p = sources + job.source + (static_cast<long>(y) * job.width + first) * 3;
  int sum[3] = {kResizeRoundingOffset, kResizeRoundingOffset, kResizeRoundingOffset};
  for (int k = 0; k < count; ++k, p += 3) {
    const int w = e[2 + k];
    sum[0] += p[0] * w;
    sum[1] += p[1] * w;
    sum[2] += p[2] * w;
  }
  std::uint8_t* o = scratch + job.scratch + (static_cast<long>(y) * size + x) * 3;
  o[0] = clip8(sum[0]);
  o[1] = clip8(sum[1]);
  o[2] = clip8(sum[2]);
}

// One thread per output pixel: Pillow's vertical pass, then flip and ToTensor + Normalize.
__global__ void vertical_pass(const CropJob* jobs, const int* taps, int stride,
                              const std::uint8_t* scratch, ResizeOutput out) {
  const CropJob job = jobs[blockIdx.y];
  const int size = out.size;
  const long t = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= static_cast<long>(size) * size) return;
  const int y = static_cast<int>(t / size);
  const int x = static_cast<int>(t % size);
  const int* e = entry(taps, blockIdx.y, 1, y, size, stride);
  const int first = e[0], count = e[1];
  const std::uint8_t* p = scratch + job.scratch + (static_cast<long>(first) * size + x) * 3;
  const long row = static_cast<long>(size) * 3;
  int sum[3] = {kResizeRoundingOffset, kResizeRoundingOffset, kResizeRoundingOffset};
  for (int k = 0; k < count; ++k, p += row) {
    const int w = e[2 + k];
    sum[0] += p[0] * w;
    sum[1] += p[1] * w;
    sum[2] += p[2] * w;
  }
  const int ox = job.flip ? size - 1 - x : x;
  // Element c of the output pixel: interleaved (NHWC) or in plane c (NCHW).
  const long plane = static_cast<long>(size) * size;
  const long pixel = static_cast<long>(y) * size + ox;
  const long at = out.planar ? static_cast<long>(job.sample) * 3 * plane + pixel
                             : (static_cast<long>(job.sample) * plane + pixel) * 3;
  const long step = out.planar ? plane : 1;
  if (out.float32) {
    float* o = static_cast<float*>(out.images) + at;
    for (int c = 0; c < 3; ++c) {
      // The CPU path's operations in the same order: v / 255, then (x - mean) / std (IEEE
      // division: this file is not built with fast math).
      const float v = static_cast<float>(clip8(sum[c])) / 255.0f;
      o[c * step] = (v - out.mean[c]) / out.std[c];
    }
  } else {
    std::uint8_t* o = static_cast<std::uint8_t*>(out.images) + at;
    for (int c = 0; c < 3; ++c) o[c * step] = clip8(sum[c]);
  }
}

}  // namespace

ResizeShape resize_shape(const CropJob* jobs, int count, int size) {
  ResizeShape s;
  s.count = count;
  for (int i = 0; i < count; ++i) {
    s.max_height = std::max(s.max_height, jobs[i].height);
    s.max_taps = std::max(
        {s.max_taps, max_filter_taps(jobs[i].width, size), max_filter_taps(jobs[i].height, size)});
  }
  return s;
}

std::uint64_t taps_bytes(const ResizeShape& shape, int size) {
  return static_cast<std::uint64_t>(shape.count) * 2 * static_cast<std::uint64_t>(size) *
         static_cast<std::uint64_t>(shape.max_taps + 2) * sizeof(int);
}

void resize_normalize(const CropJob* jobs, const ResizeShape& shape, const std::uint8_t* sources,
                      int* taps, std::uint8_t* scratch, const ResizeOutput& out,
                      cudaStream_t stream) {
  if (shape.count <= 0) return;
  const int stride = shape.max_taps + 2;
  const unsigned count = static_cast<unsigned>(shape.count);
  const dim3 w_grid(static_cast<unsigned>((2 * out.size + kThreads - 1) / kThreads), count);
  weights<<<w_grid, kThreads, 0, stream>>>(jobs, taps, out.size, stride);
  WORKLOAD_CUDA_CHECK(cudaGetLastError());
  const long rows = static_cast<long>(shape.max_height) * out.size;
  const dim3 h_grid(static_cast<unsigned>((rows + kThreads - 1) / kThreads), count);
  horizontal_pass<<<h_grid, kThreads, 0, stream>>>(jobs, taps, stride, sources, scratch, out.size);
  WORKLOAD_CUDA_CHECK(cudaGetLastError());
  const long pixels = static_cast<long>(out.size) * out.size;
  const dim3 v_grid(static_cast<unsigned>((pixels + kThreads - 1) / kThreads), count);
  vertical_pass<<<v_grid, kThreads, 0, stream>>>(jobs, taps, stride, scratch, out);
  WORKLOAD_CUDA_CHECK(cudaGetLastError());
}

}  // namespace data_pipeline::gpu
