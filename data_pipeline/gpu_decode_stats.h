// What the GPU decode stage (--decode gpu) found at construction and what it has counted since:
// plain types, without CUDA, nvJPEG or LibTorch, for code built with or without the stage.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace data_pipeline {

/// What the stage found at construction.
struct GpuDecodeInfo {
  bool hardware = false;  ///< The engines decode; false: every image takes the CPU path.
  unsigned engines = 0;   ///< nvjpegGetHardwareDecoderInfo (0 when unknown).
  unsigned cores_per_engine = 0;
  std::string nvjpeg_version;  ///< "13.0.1"
  std::string notice;          ///< Why the engines are not used, when they are not.
};

/// Cumulative counters, readable from any thread at any time.
struct GpuDecodeStats {
  std::int64_t batches = 0;          ///< Decoded (including any decoded ahead and not yet taken).
  std::int64_t hardware_images = 0;  ///< Decoded by the engines.
  std::int64_t fallback_images = 0;  ///< Decoded by the CPU path (loader threads or the stage).
  std::int64_t refused_images = 0;   ///< Of those: staged for the engines, refused by nvJPEG.
  std::int64_t failed_batches = 0;   ///< Hardware batches nvJPEG failed (their images fell back).
  std::map<std::string, std::int64_t> fallback_reasons;  ///< Why, for each fallback image.
  std::chrono::nanoseconds consumer_wait{0};             ///< Time next() blocked.
};

}  // namespace data_pipeline
