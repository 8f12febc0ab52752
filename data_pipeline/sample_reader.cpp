// Decode-or-replace: the bad-image policy around SampleTransform.
#include "data_pipeline/sample_reader.h"

#include <cstring>
#include <utility>

#include "common/hash64.h"
#include "data_pipeline/counter_rng.h"
#include "data_pipeline/data_error.h"

namespace data_pipeline {

SampleReader::SampleReader(std::shared_ptr<const Food101Index> index, const LoaderOptions& options,
                           FileReader read)
    : index_(std::move(index)),
      seed_(options.seed),
      policy_(options.on_bad_image),
      max_file_bytes_(max_image_bytes(options)),
      read_(std::move(read)),
      transform_(options.transform) {
  validate(options);
}

std::uint64_t SampleReader::transform(std::int64_t epoch, std::int64_t dataset_index, void* dst) {
  CounterRng rng(seed_, static_cast<std::uint64_t>(epoch),
                 static_cast<std::uint64_t>(dataset_index), CounterRng::kAugment);
  const std::string path = (*index_)[dataset_index].path.string();
  read_(path, file_buffer_, max_file_bytes_);
  return transform_.apply(file_buffer_.data(), file_buffer_.size(), path, rng, dst);
}

std::uint64_t SampleReader::stage_one(std::int64_t epoch, std::int64_t dataset_index, void* dst,
                                      StagedImage& staged) {
  staged = StagedImage{};
  staged.source_index = dataset_index;
  const std::string path = (*index_)[dataset_index].path.string();
  read_(path, file_buffer_, max_file_bytes_);
  const std::uint8_t* data = file_buffer_.data();
  const std::size_t size = file_buffer_.size();
  CounterRng rng(seed_, static_cast<std::uint64_t>(epoch),
                 static_cast<std::uint64_t>(dataset_index), CounterRng::kAugment);
  RouteDecision route{DecodeRoute::kCpu, "not a JPEG"};
  JpegHeader header;
  if (size > 0 && JpegDecoder::looks_like_jpeg(data, size)) {
    header = header_reader_.read_header(data, size, path);  // a broken header: the policy decides
    route = hardware_route(header);
    if (route.route == DecodeRoute::kHardware && !ends_with_eoi(data, size)) {
      route = {DecodeRoute::kCpu, "no end-of-image marker at the end of the stream"};
    }
  }
  staged.route = route.route;
  staged.reason = route.reason;
  if (route.route == DecodeRoute::kCpu) {
    // The CPU path, with the same generator: the pixels read() would write.
    staged.digest = transform_.apply(data, size, path, rng, dst);
    return staged.digest;
  }
  // The draws SampleTransform's crop chooser makes once the decoder knows the size.
  staged.params = sample_augment(rng, header.width, header.height, transform_.options().augment);
  staged.image_width = header.width;
  staged.image_height = header.height;
  staged.size = size;
  if (size <= transform_.sample_bytes()) {
    std::memcpy(dst, data, size);
  } else {
    staged.overflow.assign(data, data + size);
  }
  const CropRect& c = staged.params.crop;
  const std::int64_t geometry[6] = {
      c.x, c.y, c.width, c.height, staged.params.flip ? 1 : 0, static_cast<std::int64_t>(size)};
  staged.digest =
      common::hash64(geometry, sizeof(geometry), common::hash64(data, size, 0x6770752d6a706567ULL));
  return staged.digest;
}

template <typename Attempt>
SampleResult SampleReader::with_policy(std::int64_t epoch, std::int64_t dataset_index,
                                       Attempt&& attempt) {
  SampleResult result;
  try {
    result.digest = attempt(dataset_index);
    result.label = (*index_)[dataset_index].label;
    return result;
  } catch (const DataError& e) {
    if (policy_ != BadImagePolicy::kSkip) throw;
    CounterRng pick(seed_, static_cast<std::uint64_t>(epoch),
                    static_cast<std::uint64_t>(dataset_index), CounterRng::kReplacement);
    std::string last_error = e.what();
    for (int tries = 0; tries < kMaxReplacementAttempts; ++tries) {
      const auto candidate =
          static_cast<std::int64_t>(pick.below(static_cast<std::uint64_t>(index_->size())));
      if (candidate == dataset_index) continue;
      try {
        result.digest = attempt(candidate);
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

SampleResult SampleReader::read(std::int64_t epoch, std::int64_t dataset_index, void* dst) {
  return with_policy(epoch, dataset_index,
                     [&](std::int64_t image) { return transform(epoch, image, dst); });
}

SampleResult SampleReader::stage(std::int64_t epoch, std::int64_t dataset_index, void* dst,
                                 StagedImage& staged) {
  return with_policy(epoch, dataset_index,
                     [&](std::int64_t image) { return stage_one(epoch, image, dst, staged); });
}

}  // namespace data_pipeline
