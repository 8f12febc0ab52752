// The invariants of the data pipeline's settings.
#include "data_pipeline/loader_options.h"

#include <stdexcept>
#include <string>

namespace data_pipeline {

namespace {
void require(bool ok, const char* field, const std::string& expected, const std::string& got) {
  if (!ok)
    throw std::invalid_argument(std::string(field) + ": expected " + expected + ", got " + got);
}
}  // namespace

void validate(const TransformOptions& o) {
  require(o.image_size >= kMinImageSize, "image_size", ">= " + std::to_string(kMinImageSize),
          std::to_string(o.image_size));
  const double f = o.augment.center_fraction;
  require(f > 0 && f <= 1, "augment.center_fraction", "in (0, 1]", std::to_string(f));
}

void validate(const LoaderOptions& o) {
  require(o.batch_size >= 1, "batch_size", ">= 1", std::to_string(o.batch_size));
  require(o.workers >= 0, "workers", ">= 0", std::to_string(o.workers));
  require(o.prefetch_factor >= 1, "prefetch_factor", ">= 1", std::to_string(o.prefetch_factor));
  require(o.shard_count >= 1, "shard_count", ">= 1", std::to_string(o.shard_count));
  require(o.shard_index >= 0 && o.shard_index < o.shard_count, "shard_index",
          "in [0, " + std::to_string(o.shard_count - 1) + "]", std::to_string(o.shard_index));
  require(o.max_image_mb >= 1 && o.max_image_mb <= kMaxImageMbCeiling, "max_image_mb",
          "in [1, " + std::to_string(kMaxImageMbCeiling) + "]", std::to_string(o.max_image_mb));
  validate(o.transform);
}

}  // namespace data_pipeline
