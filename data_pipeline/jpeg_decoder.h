// libjpeg-turbo decoder that decodes only a crop, at the smallest DCT scale that keeps it big
// enough.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data_pipeline/augment.h"

namespace data_pipeline {

/// Largest image, in pixels, that any decoder of the pipeline accepts (134 megapixels: a 108 MP
/// phone photo fits), so that a corrupt or hostile header cannot make a worker allocate gigabytes.
inline constexpr std::uint64_t kMaxImagePixels = std::uint64_t{1} << 27;

/// Interleaved 8-bit RGB pixels owned by the decoder that produced them; valid until that
/// decoder's next call.
struct RgbView {
  const std::uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  std::size_t stride = 0;  ///< Bytes between rows.
};

/// What `JpegDecoder::decode` did, for tests and benchmarks.
struct DecodeInfo {
  int image_width = 0;  ///< Full-resolution size from the header.
  int image_height = 0;
  int scale_num = 8;  ///< DCT scale used: scale_num / 8.
  CropRect crop;      ///< The crop chosen in full-resolution pixels.
  /// The region actually returned, in full-resolution pixels: the crop's edges rounded to the
  /// scaled pixel grid, so each edge is within 4 / scale_num source pixels of the crop's.
  double region_x0 = 0, region_y0 = 0, region_x1 = 0, region_y1 = 0;
  bool progressive = false;
  int color_space = 0;  ///< libjpeg's J_COLOR_SPACE of the stream.
};

/// Chroma subsampling (horizontal x vertical) of a JPEG: the luma (or first) component's sampling
/// factors over the others', as in 4:2:0 = luma sampled 2x2 for each chroma sample.
enum class ChromaSubsampling {
  k444,
  k422,
  k420,
  k440,
  k411,
  k410,
  kGray,   ///< One component.
  kOther,  ///< Any other set of factors (the components disagree in unusual ways).
};

/// The colour model a JPEG stores.
enum class JpegColorSpace { kGray, kYCbCr, kRgb, kCmyk, kYcck, kOther };

/// What a JPEG's header says, read without decoding (JpegDecoder::read_header).
struct JpegHeader {
  int width = 0;
  int height = 0;
  int components = 0;
  ChromaSubsampling subsampling = ChromaSubsampling::kOther;
  JpegColorSpace color_space = JpegColorSpace::kOther;
  bool progressive = false;
  bool arithmetic = false;   ///< Arithmetic rather than Huffman entropy coding.
  int precision = 8;         ///< Bits per sample.
  int restart_interval = 0;  ///< MCUs between restart markers, 0 for none.
};

/// How much of the image to decode.
enum class DecodeMode {
  kFusedRoi,  ///< Only the crop's rows and iMCU columns, at the smallest sufficient DCT scale.
  kFull,      ///< The whole image at full resolution; the view is the crop inside it.
};

/// A reusable libjpeg-turbo decompressor.
///
/// Handles baseline and progressive streams, any chroma subsampling, restart markers, arithmetic
/// coding, grayscale (expanded to RGB) and CMYK/YCCK (converted to RGB; Adobe-marked streams are
/// taken as inverted, as Photoshop writes them). libjpeg errors never call `exit`: they become
/// `DataError`s naming the file, and so does a stream cut short (no end-of-image marker after the
/// scan data, or libjpeg's premature-end warning).
///
/// Not thread-safe: use one decoder per thread. Construction allocates libjpeg's state once; calls
/// reuse it and the decoder's pixel buffers, so steady-state decoding does not allocate.
class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  /// True when `data` starts with a JPEG SOI marker followed by another marker.
  static bool looks_like_jpeg(const std::uint8_t* data, std::size_t size);

  /// Callback that picks the crop once the image size is known.
  using CropChooser = CropRect (*)(void* context, int image_width, int image_height);

  /// Decodes `data` (named `name` in errors). `choose` receives the full image size and returns
  /// the crop in full-resolution pixels (clamped to the image). With kFusedRoi the decoder picks
  /// the smallest scale M/8 with M in {1, 2, 4, 8} (the scales libjpeg-turbo decodes with SIMD;
  /// M >= 2 for 4x chroma subsampling) at which the crop is still at least `min_width` x
  /// `min_height`, and decodes only the crop's region; the returned view is the crop at that
  /// scale, so it is less than twice the requested size in each direction unless the 1/8 scale
  /// was reached. With kFull the view is the crop inside a full-resolution decode.
  /// \throws DataError for anything libjpeg rejects or a truncated stream.
  RgbView decode(const std::uint8_t* data, std::size_t size, const std::string& name,
                 CropChooser choose, void* context, int min_width, int min_height, DecodeMode mode,
                 DecodeInfo* info = nullptr);

  /// Reads and checks the header only (size, components, subsampling, coding), with the same
  /// checks as decode(): a stream without an end-of-image marker after its scan data, or larger
  /// than kMaxImagePixels, is a DataError, so an image read_header accepts is one decode() reads.
  /// \throws DataError naming `name`.
  JpegHeader read_header(const std::uint8_t* data, std::size_t size, const std::string& name);

  /// Decodes the whole image at full resolution.
  RgbView decode_full(const std::uint8_t* data, std::size_t size, const std::string& name,
                      DecodeInfo* info = nullptr);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace data_pipeline
