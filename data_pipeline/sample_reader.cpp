// Decode-or-replace: the bad-image policy around SampleTransform.
#include "data_pipeline/sample_reader.h"

#include <utility>

#include "data_pipeline/counter_rng.h"
#include "data_pipeline/data_error.h"

namespace data_pipeline {

SampleReader::SampleReader(std::shared_ptr<const Food101Index> index, const LoaderOptions& options)
    : index_(std::move(index)),
      seed_(options.seed),
      policy_(options.on_bad_image),
      transform_(options.transform) {}

std::uint64_t SampleReader::transform(std::int64_t epoch, std::int64_t dataset_index, void* dst) {
  CounterRng rng(seed_, static_cast<std::uint64_t>(epoch),
                 static_cast<std::uint64_t>(dataset_index), CounterRng::kAugment);
  return transform_.apply_file((*index_)[dataset_index].path.string(), rng, dst);
}

SampleResult SampleReader::read(std::int64_t epoch, std::int64_t dataset_index, void* dst) {
  SampleResult result;
  try {
    result.digest = transform(epoch, dataset_index, dst);
    result.label = (*index_)[dataset_index].label;
    return result;
  } catch (const DataError& e) {
    if (policy_ != BadImagePolicy::kSkip) throw;
    CounterRng pick(seed_, static_cast<std::uint64_t>(epoch),
                    static_cast<std::uint64_t>(dataset_index), CounterRng::kReplacement);
    std::string last_error = e.what();
    for (int attempt = 0; attempt < kMaxReplacementAttempts; ++attempt) {
      const auto candidate =
          static_cast<std::int64_t>(pick.below(static_cast<std::uint64_t>(index_->size())));
      if (candidate == dataset_index) continue;
      try {
        result.digest = transform(epoch, candidate, dst);
      } catch (const DataError& again) {
        last_error = again.what();
        continue;
      }
      result.label = (*index_)[candidate].label;
      result.skipped = SkippedImage{(*index_)[dataset_index].path.string(), e.what(), epoch,
                                    dataset_index, (*index_)[candidate].path.string()};
      return result;
    }
    throw DataError(std::string(e.what()) + " (and no replacement image decoded after " +
                    std::to_string(kMaxReplacementAttempts) + " attempts; last: " + last_error +
                    ")");
  }
}

}  // namespace data_pipeline
