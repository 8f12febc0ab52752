// The floor of nvJPEG's batched hardware decode: the CUDA calls one nvjpegDecodeBatchedEx makes
// for a batch, with nothing of the GPU decode stage around it (issue 32), for nvjpeg_floor.
#pragma once

#include <cstdint>
#include <string>

#include "common/named_enum.h"

namespace workload::bench {

/// What nvJPEG writes: interleaved RGB (what the GPU decode stage asks for), the JPEG's own planes
/// as coded (YUV, no colour conversion) or the luma plane alone.
enum class FloorOutput { kRgbi, kYuv, kY };
inline constexpr common::EnumName<FloorOutput> kFloorOutputNames[] = {
    {FloorOutput::kRgbi, "rgbi"}, {FloorOutput::kYuv, "yuv"}, {FloorOutput::kY, "y"}};
constexpr const auto& enum_names(FloorOutput) { return kFloorOutputNames; }

/// What nvjpeg_floor decodes and how.
struct FloorOptions {
  std::string data;       ///< Food-101 root: the batch is its first images of the train split
  int batch = 128;        ///< images per nvjpegDecodeBatchedEx
  int iterations = 20;    ///< batches decoded inside the capture range
  int warmup = 3;         ///< batches decoded before it
  bool pinned = true;     ///< bitstreams in page-locked memory (as the stage's ring holds them)
  int crop = 0;           ///< > 0: a centred crop of this side as the region of interest; 0: whole
  bool sync_each = true;  ///< wait for each batch on the host (as the stage's reuse fence does)
  FloorOutput output = FloorOutput::kRgbi;  ///< the output format (not yuv/y with a crop)
};

/// Decodes `options.iterations` batches on the hardware backend, each in an NVTX range
/// `decode_batch` (default domain) between cudaProfilerStart and cudaProfilerStop, so that
/// `nsys --capture-range=cudaProfilerApi` records exactly those; returns images/s.
/// \throws UsageError naming the flag (no engines, no images, --output yuv or y with --crop),
///         DataError naming a file,
///         std::runtime_error for CUDA and nvJPEG failures.
double run_nvjpeg_floor(const FloorOptions& options);

}  // namespace workload::bench
