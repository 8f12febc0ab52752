// The resize kernel: a horizontal pass into 8-bit rows, then a vertical pass that also flips,
// normalises and writes channels-last. The weights are computed per thread from
// data_pipeline/resize_filter.h, the same arithmetic as the CPU reference.
#include "data_pipeline/gpu/resize_normalize.h"

#include "data_pipeline/cuda_check.h"
#include "data_pipeline/resize_filter.h"

namespace data_pipeline::gpu {
namespace {

constexpr int kThreads = 256;

// One thread per (crop row, output column): Pillow's horizontal pass.
__global__ void horizontal_pass(const CropJob* jobs, const std::uint8_t* sources,
                                std::uint8_t* scratch, int size) {
  const CropJob job = jobs[blockIdx.y];
  const long t = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int y = static_cast<int>(t / size);
  const int x = static_cast<int>(t % size);
  if (y >= job.height) return;
  const FilterTaps taps = filter_taps(x, job.width, size);
  const std::uint8_t* row = sources + job.source + static_cast<long>(y) * job.width * 3;
  int sum[3] = {kResizeRoundingOffset, kResizeRoundingOffset, kResizeRoundingOffset};
  for (int j = taps.first; j < taps.first + taps.count; ++j) {
    const int w = filter_weight_fixed(taps, j);
    const std::uint8_t* p = row + j * 3;
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
__global__ void vertical_pass(const CropJob* jobs, const std::uint8_t* scratch, ResizeOutput out) {
  const CropJob job = jobs[blockIdx.y];
  const int size = out.size;
  const long t = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= static_cast<long>(size) * size) return;
  const int y = static_cast<int>(t / size);
  const int x = static_cast<int>(t % size);
  const FilterTaps taps = filter_taps(y, job.height, size);
  int sum[3] = {kResizeRoundingOffset, kResizeRoundingOffset, kResizeRoundingOffset};
  for (int j = taps.first; j < taps.first + taps.count; ++j) {
    const int w = filter_weight_fixed(taps, j);
    const std::uint8_t* p = scratch + job.scratch + (static_cast<long>(j) * size + x) * 3;
    sum[0] += p[0] * w;
    sum[1] += p[1] * w;
    sum[2] += p[2] * w;
  }
  const int ox = job.flip ? size - 1 - x : x;
  const long at = ((static_cast<long>(job.sample) * size + y) * size + ox) * 3;
  if (out.float32) {
    float* o = static_cast<float*>(out.images) + at;
    for (int c = 0; c < 3; ++c) {
      // The CPU path's operations in the same order: v / 255, then (x - mean) / std (IEEE
      // division: this file is not built with fast math).
      const float v = static_cast<float>(clip8(sum[c])) / 255.0f;
      o[c] = (v - out.mean[c]) / out.std[c];
    }
  } else {
    std::uint8_t* o = static_cast<std::uint8_t*>(out.images) + at;
    for (int c = 0; c < 3; ++c) o[c] = clip8(sum[c]);
  }
}

}  // namespace

void resize_normalize(const CropJob* jobs, int count, int max_height, const std::uint8_t* sources,
                      std::uint8_t* scratch, const ResizeOutput& out, cudaStream_t stream) {
  if (count <= 0) return;
  const long rows = static_cast<long>(max_height) * out.size;
  const dim3 h_grid(static_cast<unsigned>((rows + kThreads - 1) / kThreads),
                    static_cast<unsigned>(count));
  horizontal_pass<<<h_grid, kThreads, 0, stream>>>(jobs, sources, scratch, out.size);
  WORKLOAD_CUDA_CHECK(cudaGetLastError());
  const long pixels = static_cast<long>(out.size) * out.size;
  const dim3 v_grid(static_cast<unsigned>((pixels + kThreads - 1) / kThreads),
                    static_cast<unsigned>(count));
  vertical_pass<<<v_grid, kThreads, 0, stream>>>(jobs, scratch, out);
  WORKLOAD_CUDA_CHECK(cudaGetLastError());
}

}  // namespace data_pipeline::gpu
