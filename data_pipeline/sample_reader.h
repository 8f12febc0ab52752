// Decode-or-replace: one dataset image into its place in a batch, under the bad-image policy.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "data_pipeline/food101_index.h"
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

/// Reads dataset images through a SampleTransform with the generator keyed by (seed, epoch,
/// image), so a sample is a pure function of those and of the file, whatever thread reads it.
///
/// Under BadImagePolicy::kSkip an image that fails to read or decode is replaced by another one of
/// the split: candidates are drawn from a generator keyed by (seed, epoch, image) and tried in
/// order (at most kMaxReplacementAttempts), each transformed with its own key, so every loader
/// setting picks the same replacement. Not thread-safe: one reader per thread (it owns the
/// transform's buffers).
class SampleReader {
 public:
  static constexpr int kMaxReplacementAttempts = 32;

  /// \throws std::invalid_argument for transform options `validate` rejects.
  SampleReader(std::shared_ptr<const Food101Index> index, const LoaderOptions& options);

  /// Writes dataset image `dataset_index` of `epoch` (or its replacement) at `dst`
  /// (`sample_bytes()` bytes). \throws DataError naming the file when the image is bad and the
  /// policy is kError, or when no replacement decodes either.
  SampleResult read(std::int64_t epoch, std::int64_t dataset_index, void* dst);

  std::size_t sample_bytes() const { return transform_.sample_bytes(); }

 private:
  std::uint64_t transform(std::int64_t epoch, std::int64_t dataset_index, void* dst);

  std::shared_ptr<const Food101Index> index_;
  std::uint64_t seed_;
  BadImagePolicy policy_;
  SampleTransform transform_;
};

}  // namespace data_pipeline
