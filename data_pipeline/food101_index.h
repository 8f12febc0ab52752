// Food-101 dataset index: the (image path, label) list of one split, read from the meta files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/named_enum.h"

namespace data_pipeline {

/// The splits a Food-101 layout lists (meta/train.txt, meta/test.txt).
enum class Split { kTrain, kTest };
inline constexpr common::EnumName<Split> kSplitNames[] = {{Split::kTrain, "train"},
                                                          {Split::kTest, "test"}};
constexpr const auto& enum_names(Split) { return kSplitNames; }

/// One image of a split.
struct Sample {
  std::filesystem::path path;  ///< Absolute or root-relative path of the image file.
  std::int64_t label;          ///< Zero-based line number of the class in meta/classes.txt.
};

/// The dataset directory of a Food-101 layout under `root`: root/food-101 when it holds meta/,
/// else `root` when it does; nullopt when neither does (or `root` is empty). Looks at directories
/// only.
std::optional<std::filesystem::path> find_dataset_dir(const std::filesystem::path& root);

/// The samples of one split of a Food-101-layout dataset:
///   <root>/food-101/{images/<class>/<id>.jpg, meta/classes.txt, meta/train.txt, meta/test.txt}
/// where <root> may also name the food-101/ directory itself.
///
/// Immutable after construction; safe to share between threads.
class Food101Index {
 public:
  /// Reads classes.txt and <split>.txt and checks that every listed image exists as a regular
  /// file. Tolerates CRLF line endings, blank lines and a missing final newline.
  /// \throws DataError naming the file (and line) for any defect: missing root or meta file,
  ///         unknown split, empty split, duplicate or unknown class, missing image, directory in
  ///         place of an image.
  static Food101Index load(const std::filesystem::path& root, const std::string& split);

  /// Builds an index from explicit parts (tests, synthetic sets). Labels must be < classes.size().
  Food101Index(std::filesystem::path dataset_dir, std::string split,
               std::vector<std::string> classes, std::vector<Sample> samples);

  const std::filesystem::path& dataset_dir() const { return dataset_dir_; }
  const std::string& split() const { return split_; }
  const std::vector<std::string>& classes() const { return classes_; }
  std::int64_t num_classes() const { return static_cast<std::int64_t>(classes_.size()); }
  const std::vector<Sample>& samples() const { return samples_; }
  std::int64_t size() const { return static_cast<std::int64_t>(samples_.size()); }
  const Sample& operator[](std::int64_t i) const { return samples_[static_cast<size_t>(i)]; }

 private:
  std::filesystem::path dataset_dir_;  // the food-101/ directory
  std::string split_;
  std::vector<std::string> classes_;
  std::vector<Sample> samples_;
};

}  // namespace data_pipeline
