// One sample end to end: file bytes -> fused ROI decode -> resize -> flip -> normalise -> NHWC
// slot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "data_pipeline/augment.h"
#include "data_pipeline/counter_rng.h"
#include "data_pipeline/jpeg_decoder.h"
#include "data_pipeline/loader_options.h"

namespace data_pipeline {

/// Where one `SampleTransform::apply` or `apply_file` call spent its time, in nanoseconds of
/// `std::chrono::steady_clock`, stage by stage. The stages are consecutive, so their sum is the
/// call's time less a few clock reads. For a non-JPEG file `decode_ns` is OpenCV's decode and RGB
/// conversion. Filled only when the caller passes one: without it the transform reads no clock.
struct TransformTimes {
  std::int64_t read_ns = 0;    ///< The file into memory (`apply_file` only; 0 from `apply`).
  std::int64_t decode_ns = 0;  ///< Header, crop choice, entropy decode + IDCT + colour conversion.
  std::int64_t resize_ns = 0;  ///< `cv::resize` to the output size (a copy when already there).
  std::int64_t write_ns = 0;   ///< Flip + normalise (or uint8 copy) into the caller's memory.
  std::int64_t digest_ns = 0;  ///< `hash64` of the written sample (the returned digest).

  std::int64_t total_ns() const { return read_ns + decode_ns + resize_ns + write_ns + digest_ns; }
};

/// Decodes, augments and writes one sample at a time.
///
/// Equivalent to torchvision's `RandomResizedCrop(S, scale=(0.08, 1), ratio=(3/4, 4/3))`,
/// `RandomHorizontalFlip(0.5)`, `ToTensor()`, `Normalize(ImageNet mean, std)`: the crop and flip
/// come from `sample_augment`; the crop, already reduced by the decoder's DCT scaling, is resized
/// with OpenCV (`resize_interpolation`) and written channels-last (H x W x 3) into the caller's
/// memory, or as three planes (3 x H x W) with ImageLayout::kNchw.
/// JPEG goes through `JpegDecoder`; other formats through OpenCV's imgcodecs when this build has
/// it. EXIF orientation is ignored, as in torchvision's PIL path.
///
/// Not thread-safe: one instance per worker thread. Buffers are reused across calls.
class SampleTransform {
 public:
  /// \throws std::invalid_argument for options `validate` rejects.
  explicit SampleTransform(TransformOptions options);

  const TransformOptions& options() const { return options_; }
  /// Bytes one sample occupies in a batch buffer.
  std::size_t sample_bytes() const { return data_pipeline::sample_bytes(options_); }

  /// Transforms the encoded image `data` (named `name` in errors) with the random decisions drawn
  /// from `rng` and writes `sample_bytes()` bytes at `dst`. Returns a 64-bit digest of them.
  /// When `times` is not null it receives the time of each stage (`read_ns` = 0); the output does
  /// not depend on it. After a throw `*times` is unspecified.
  /// \throws DataError when the image cannot be decoded.
  std::uint64_t apply(const std::uint8_t* data, std::size_t size, const std::string& name,
                      CounterRng& rng, void* dst, DecodeInfo* info = nullptr,
                      TransformTimes* times = nullptr);

  /// Reads `path` (`read_file` under the cap `max_bytes`, by default kDefaultMaxImageMb MiB) and
  /// applies the transform (the buffer is reused across calls); `times`, when not null, includes
  /// the read. \throws DataError when the file cannot be read (or is over the cap) or decoded.
  std::uint64_t apply_file(const std::string& path, CounterRng& rng, void* dst,
                           DecodeInfo* info = nullptr, TransformTimes* times = nullptr,
                           std::uint64_t max_bytes = static_cast<std::uint64_t>(kDefaultMaxImageMb)
                                                     << 20);

  /// True when this build can decode non-JPEG files (OpenCV imgcodecs present).
  static bool has_fallback_decoder();

 private:
  RgbView decode_other(const std::uint8_t* data, std::size_t size, const std::string& name,
                       CounterRng& rng, AugmentParams& params, DecodeInfo* info);
  std::uint64_t write(const RgbView& crop, bool flip, void* dst, TransformTimes* times);

  TransformOptions options_;
  JpegDecoder decoder_;
  cv::Mat resized_;
  cv::Mat other_rgb_;
  std::vector<std::uint8_t> file_buffer_;
  float lut_[3][256] = {};  // (v / 255 - mean[c]) / std[c], bit-identical to ToTensor + Normalize
};

/// The OpenCV interpolation used to resize a `width` x `height` crop to `size` x `size`:
/// bilinear up to a 2x reduction, area averaging beyond.
int resize_interpolation(int width, int height, int size);

/// Reads a whole regular file into `buffer` (resized to fit), refusing a larger one than
/// `max_bytes` before reading a byte (an image file's cap, `LoaderOptions::max_image_mb`). Never
/// blocks on what is not a regular file: the open does not wait (O_NONBLOCK, so a FIFO without a
/// writer or a device is opened at once) and the type is checked on the open descriptor. A read
/// can still block on a hung filesystem; `Loader::stop` bounds its wait for that. Thread-safe.
/// \throws DataError naming the file when it cannot be opened or read, is not a regular file, or
///         is larger than `max_bytes` (naming its size, the limit and --max-image-mb).
void read_file(const std::string& path, std::vector<std::uint8_t>& buffer,
               std::uint64_t max_bytes = static_cast<std::uint64_t>(kDefaultMaxImageMb) << 20);

}  // namespace data_pipeline
