// Decode-or-replace: one dataset image into its place in a batch, under the bad-image policy.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data_pipeline/augment.h"
#include "data_pipeline/decode_route.h"
#include "data_pipeline/food101_index.h"
#include "data_pipeline/jpeg_decoder.h"
#include "data_pipeline/loader_options.h"
#include "data_pipeline/sample_transform.h"

namespace data_pipeline {

/// An image the loader replaced under BadImagePolicy::kSkip.
struct SkippedImage {
  std::string path;
  std::string reason;
  std::int64_t epoch = 0;
  std::int64_t dataset_index = 0;
  std::string replacement;  ///< Path of the image used in its place.
};

/// What reading one dataset image wrote.
struct SampleResult {
  std::int64_t label = 0;               ///< The label of the image written (a replacement's own).
  std::uint64_t digest = 0;             ///< Digest of the sample bytes written.
  std::optional<SkippedImage> skipped;  ///< Set when the image was replaced.
};

/// How one image of a --decode gpu batch reaches the GPU stage (`SampleReader::stage`).
///
/// kHardware: the file's compressed bytes, to be decoded by the engines, with the crop window (in
/// the image's own pixels) and flip drawn exactly as the CPU path draws them. The bytes are in the
/// sample's own area of the batch when they fit there (`size <= sample_bytes`), else in
/// `overflow`. kCpu: the CPU path already wrote the sample's pixels to its area; `reason` says why
/// the engines were passed over.
struct StagedImage {
  DecodeRoute route = DecodeRoute::kCpu;
  const char* reason = "";
  AugmentParams params;  ///< kHardware: the crop and the flip.
  int image_width = 0;   ///< kHardware: the JPEG's size.
  int image_height = 0;
  std::size_t size = 0;                ///< kHardware: compressed bytes.
  std::vector<std::uint8_t> overflow;  ///< kHardware: the bytes when larger than the sample area.
  std::int64_t source_index = 0;       ///< The dataset image staged (a replacement's own index).
  std::uint64_t digest = 0;            ///< Of the pixels (kCpu) or of bytes, crop and flip.

  /// The compressed bytes, given the sample's area in the batch.
  const std::uint8_t* bytes(const std::uint8_t* sample_area) const {
    return overflow.empty() ? sample_area : overflow.data();
  }
};

/// How a SampleReader reads an image file: `read_file` by default; a test passes a stand-in (e.g.
/// one that blocks, as a read on a hung filesystem does). Same contract as read_file, which it is
/// called for in place of: on the reader's thread, and by several readers at once.
using FileReader = std::function<void(const std::string& path, std::vector<std::uint8_t>& buffer,
                                      std::uint64_t max_bytes)>;

/// Reads dataset images through a SampleTransform with the generator keyed by (seed, epoch,
/// image), so a sample is a pure function of those and of the file, whatever thread reads it.
///
/// Under BadImagePolicy::kSkip an image that fails to read or decode is replaced by another one of
/// the split: candidates are drawn from a generator keyed by (seed, epoch, image) and tried in
/// order (at most kMaxReplacementAttempts), each transformed with its own key, so every loader
/// setting picks the same replacement. A file larger than `max_image_mb`, or not a regular file,
/// is such an image: refused before it is read. Not thread-safe: one reader per thread (it owns
/// the transform's buffers).
class SampleReader {
 public:
  static constexpr int kMaxReplacementAttempts = 32;

  /// Reads files with `read` (see FileReader).
  /// \throws std::invalid_argument for options `validate` rejects.
  SampleReader(std::shared_ptr<const Food101Index> index, const LoaderOptions& options,
               FileReader read = read_file);

  /// Writes dataset image `dataset_index` of `epoch` (or its replacement) at `dst`
  /// (`sample_bytes()` bytes). \throws DataError naming the file when the image is bad and the
  /// policy is kError, or when no replacement decodes either.
  SampleResult read(std::int64_t epoch, std::int64_t dataset_index, void* dst);

  /// The --decode gpu counterpart of read(): reads the file and its JPEG header and, when the
  /// hardware decoder takes it (`hardware_route`, and the stream ends with its end-of-image
  /// marker), draws the crop and flip from the same generator as read() and stages the bytes at
  /// `dst` (or in `staged.overflow`) without decoding; otherwise transforms it as read() does.
  /// The bad-image policy applies as in read(): an image whose header cannot be read is replaced
  /// by the same candidate read() would pick.
  /// \throws DataError as read() does.
  SampleResult stage(std::int64_t epoch, std::int64_t dataset_index, void* dst,
                     StagedImage& staged);

  std::size_t sample_bytes() const { return transform_.sample_bytes(); }

 private:
  std::uint64_t transform(std::int64_t epoch, std::int64_t dataset_index, void* dst);
  std::uint64_t stage_one(std::int64_t epoch, std::int64_t dataset_index, void* dst,
                          StagedImage& staged);
  // The policy around `attempt(candidate)`, which returns the digest of what it wrote.
  template <typename Attempt>
  SampleResult with_policy(std::int64_t epoch, std::int64_t dataset_index, Attempt&& attempt);

  std::shared_ptr<const Food101Index> index_;
  std::uint64_t seed_;
  BadImagePolicy policy_;
  std::uint64_t max_file_bytes_;
  FileReader read_;
  SampleTransform transform_;
  JpegDecoder header_reader_;              // stage(): headers only
  std::vector<std::uint8_t> file_buffer_;  // the file read
};

}  // namespace data_pipeline
