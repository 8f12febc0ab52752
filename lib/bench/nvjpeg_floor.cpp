// The floor of nvJPEG's batched hardware decode (lib/bench/nvjpeg_floor.h): the one file of
// lib/bench besides gpu_stage_bench.cpp that compiles against nvJPEG, built only where it exists.
#include "lib/bench/nvjpeg_floor.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <nvjpeg.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "data_pipeline/food101_index.h"
#include "data_pipeline/gpu/cuda_resources.h"
#include "data_pipeline/gpu/nvjpeg_handles.h"
#include "data_pipeline/host_block.h"
#include "data_pipeline/sample_transform.h"
#include "lib/core/usage_error.h"

namespace workload::bench {

namespace {

namespace dp = data_pipeline;
namespace gpu = data_pipeline::gpu;

// The batch's bitstreams, one after another in one block (page-locked or not).
struct Bitstreams {
  dp::HostBlock block;
  std::vector<const unsigned char*> data;
  std::vector<std::size_t> lengths;
};

Bitstreams load_bitstreams(const FloorOptions& o) {
  const dp::Food101Index index = dp::Food101Index::load(o.data, "train");
  if (index.size() < o.batch) {
    throw UsageError("--batch " + std::to_string(o.batch) + ": " + o.data + " has only " +
                     std::to_string(index.size()) + " training images");
  }
  std::vector<std::vector<std::uint8_t>> files(static_cast<std::size_t>(o.batch));
  std::size_t total = 0;
  for (int i = 0; i < o.batch; ++i) {
    dp::read_file(index[i].path.string(), files[static_cast<std::size_t>(i)]);
    total += files[static_cast<std::size_t>(i)].size();
  }
  Bitstreams b;
  b.block = dp::HostBlock(total, o.pinned);
  auto* at = static_cast<unsigned char*>(b.block.data());
  for (const auto& f : files) {
    std::memcpy(at, f.data(), f.size());
    b.data.push_back(at);
    b.lengths.push_back(f.size());
    at += f.size();
  }
  return b;
}

nvjpegOutputFormat_t nvjpeg_format(FloorOutput output) {
  switch (output) {
    case FloorOutput::kRgbi:
      return NVJPEG_OUTPUT_RGBI;
    case FloorOutput::kYuv:
      return NVJPEG_OUTPUT_YUV;
    case FloorOutput::kY:
      return NVJPEG_OUTPUT_Y;
  }
  throw std::logic_error("nvjpeg_floor: unknown FloorOutput " +
                         std::to_string(static_cast<int>(output)));
}

// One output buffer per plane an image's output has, sized for its region: one interleaved RGB
// plane, the luma plane alone, or each coded plane at its own (subsampled) size.
struct Outputs {
  std::vector<gpu::DeviceMemory> memory;
  std::vector<nvjpegImage_t> images;
  std::vector<gpu::NvjpegParams> params;
  std::vector<nvjpegDecodeParams_t> raw_params;
};

Outputs make_outputs(nvjpegHandle_t h, const Bitstreams& b, int crop, FloorOutput output) {
  Outputs out;
  for (std::size_t i = 0; i < b.data.size(); ++i) {
    int components = 0, widths[NVJPEG_MAX_COMPONENT] = {}, heights[NVJPEG_MAX_COMPONENT] = {};
    nvjpegChromaSubsampling_t subsampling;
    WORKLOAD_NVJPEG_CHECK(
        nvjpegGetImageInfo(h, b.data[i], b.lengths[i], &components, &subsampling, widths, heights));
    int w = widths[0], hgt = heights[0], x = 0, y = 0;
    nvjpegDecodeParams_t p = nullptr;
    WORKLOAD_NVJPEG_CHECK(nvjpegDecodeParamsCreate(h, &p));
    out.params.emplace_back(p);
    WORKLOAD_NVJPEG_CHECK(nvjpegDecodeParamsSetOutputFormat(p, nvjpeg_format(output)));
    if (crop > 0) {
      const int side = std::min({crop, w, hgt});
      x = (w - side) / 2;
      y = (hgt - side) / 2;
      w = hgt = side;
      WORKLOAD_NVJPEG_CHECK(nvjpegDecodeParamsSetROI(p, x, y, w, hgt));
    }
    out.raw_params.push_back(p);
    nvjpegImage_t img{};
    auto plane = [&](int c, int plane_w, int plane_h, int bytes_per_pixel) {
      out.memory.emplace_back(static_cast<std::size_t>(plane_w) * plane_h * bytes_per_pixel);
      img.channel[c] = out.memory.back().data();
      img.pitch[c] = static_cast<std::size_t>(plane_w) * bytes_per_pixel;
    };
    switch (output) {
      case FloorOutput::kRgbi:
        plane(0, w, hgt, 3);
        break;
      case FloorOutput::kY:
        plane(0, w, hgt, 1);
        break;
      case FloorOutput::kYuv:
        // Every coded plane at its size; a grey image's missing chroma planes get buffers too.
        for (int c = 0; c < 3; ++c) {
          const int k = c < components ? c : 0;
          plane(c, std::max(widths[k], 1), std::max(heights[k], 1), 1);
        }
        break;
    }
    out.images.push_back(img);
  }
  return out;
}

}  // namespace

double run_nvjpeg_floor(const FloorOptions& o) {
  if (o.crop > 0 && o.output != FloorOutput::kRgbi) {
    throw UsageError(std::string("--output ") + common::to_string(o.output) +
                     ": the planes are sized for whole images; use --crop 0");
  }
  nvjpegHandle_t raw = nullptr;
  if (nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, NVJPEG_FLAGS_DEFAULT, &raw) !=
      NVJPEG_STATUS_SUCCESS) {
    throw UsageError("--data " + o.data + ": this GPU has no hardware JPEG decoder for nvJPEG");
  }
  const gpu::NvjpegHandle handle(raw);
  nvjpegJpegState_t raw_state = nullptr;
  WORKLOAD_NVJPEG_CHECK(nvjpegJpegStateCreate(handle.get(), &raw_state));
  const gpu::NvjpegState state(raw_state);
  cudaStream_t stream = nullptr;
  WORKLOAD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const Bitstreams b = load_bitstreams(o);
  Outputs out = make_outputs(handle.get(), b, o.crop, o.output);
  WORKLOAD_NVJPEG_CHECK(nvjpegDecodeBatchedInitialize(handle.get(), state.get(), o.batch, 1,
                                                      nvjpeg_format(o.output)));
  auto decode = [&] {
    WORKLOAD_NVJPEG_CHECK(nvjpegDecodeBatchedEx(handle.get(), state.get(), b.data.data(),
                                                b.lengths.data(), out.images.data(),
                                                out.raw_params.data(), stream));
    if (o.sync_each) WORKLOAD_CUDA_CHECK(cudaStreamSynchronize(stream));
  };
  for (int i = 0; i < o.warmup; ++i) decode();
  WORKLOAD_CUDA_CHECK(cudaStreamSynchronize(stream));
  WORKLOAD_CUDA_CHECK(cudaProfilerStart());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iterations; ++i) {
    nvtxRangePushA("decode_batch");
    decode();
    nvtxRangePop();
  }
  WORKLOAD_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WORKLOAD_CUDA_CHECK(cudaProfilerStop());
  WORKLOAD_CUDA_CHECK_NOTHROW(cudaStreamDestroy(stream));
  return static_cast<double>(o.iterations) * o.batch / s;
}

}  // namespace workload::bench
