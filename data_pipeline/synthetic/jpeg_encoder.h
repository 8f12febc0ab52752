// libjpeg-turbo encoder for the synthetic dataset and for test images of every JPEG kind.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data_pipeline/jpeg_decoder.h"

namespace data_pipeline {

/// Colour model of the encoded stream.
enum class JpegColor {
  kYCbCr,      ///< Ordinary colour JPEG from RGB input.
  kGrayscale,  ///< One component; input must have 1 channel.
  kCmykAdobe,  ///< Four components from CMYK input, with an Adobe marker; the caller supplies
               ///< inverted inks (255 = no ink), as Photoshop writes them.
  kYcckAdobe,  ///< As kCmykAdobe but stored as YCCK.
};

/// Encoder settings.
struct JpegEncodeOptions {
  int quality = 85;
  ChromaSubsampling subsampling = ChromaSubsampling::k420;  ///< k444 .. k410 (kGray, kOther: none)
  JpegColor color = JpegColor::kYCbCr;
  bool progressive = false;
  bool arithmetic = false;   ///< Arithmetic instead of Huffman entropy coding.
  int restart_interval = 0;  ///< In MCU rows' worth of MCUs (libjpeg's restart_interval), 0 = none.
  bool optimize_coding = false;
};

/// Encodes interleaved 8-bit pixels (`channels` = 1, 3 or 4 matching `options.color`) with
/// `stride` bytes between rows. Thread-safe (no shared state).
/// \throws std::runtime_error with libjpeg's message when encoding fails.
std::vector<std::uint8_t> encode_jpeg(const std::uint8_t* pixels, int width, int height,
                                      int channels, std::size_t stride,
                                      const JpegEncodeOptions& options = {});

}  // namespace data_pipeline
