// A synthetic dataset in the Food-101 layout: real JPEG files that decode like food photos.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace data_pipeline {

/// Settings of `write_synthetic_food101`.
struct SyntheticFoodOptions {
  int classes = 101;
  int per_class = 100;
  std::uint64_t seed = 2026;
  int quality = 85;
  int threads = 0;              ///< 0 = hardware concurrency.
  double test_fraction = 0.25;  ///< Share of each class listed in meta/test.txt.
  /// How strongly an image shows its class, in [0, 1]: the ellipses' colours are pulled this far
  /// toward the class's tint and the colour field's swing shrinks by as much. 0 (the default)
  /// writes the same bytes as before the option existed; 1 leaves only the tint, the shapes' edges
  /// and the noise: classes a small model tells apart within a few epochs (tests).
  double class_signal = 0;
};

/// What was written.
struct SyntheticFoodSummary {
  std::filesystem::path dataset_dir;  ///< <out>/food-101
  std::int64_t images = 0;
  std::int64_t train_images = 0;
  std::int64_t test_images = 0;
  std::int64_t total_bytes = 0;
};

/// The 101 Food-101 class names, in the order of the real meta/classes.txt; beyond 101 classes
/// the names continue as class_101, class_102, ...
std::vector<std::string> synthetic_class_names(int classes);

/// One synthetic "food photo" as 8-bit RGB: longest side 512, the other in [340, 512], smooth
/// colour fields, blurred filled ellipses (edges) and mild Gaussian-like noise. A pure function
/// of (seed, class, item, class_signal) (SyntheticFoodOptions::class_signal).
cv::Mat make_synthetic_food_image(std::uint64_t seed, int class_index, int item,
                                  double class_signal = 0);

/// Writes <out>/food-101/{images/<class>/<id>.jpg, meta/classes.txt, labels.txt, train.txt,
/// test.txt, train.json, test.json}. Deterministic for a seed (file bytes included) whatever the
/// thread count. \throws std::runtime_error naming the path on any I/O failure.
SyntheticFoodSummary write_synthetic_food101(const std::filesystem::path& out,
                                             const SyntheticFoodOptions& options);

}  // namespace data_pipeline
