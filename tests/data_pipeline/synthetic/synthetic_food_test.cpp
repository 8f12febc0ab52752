// Tests for the synthetic Food-101 writer (food101_synth's engine): a valid, deterministic dataset.
#include "data_pipeline/synthetic/synthetic_food.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "data_pipeline/food101_index.h"
#include "data_pipeline/jpeg_decoder.h"
#include "tests/support/test_util.h"

namespace data_pipeline {
namespace {

namespace fs = std::filesystem;

TEST(SyntheticFoodTest, WritesAValidFood101Dataset) {
  test_util::TempDir tmp;
  SyntheticFoodOptions o;
  o.classes = 4;
  o.per_class = 12;
  o.threads = 2;
  const auto summary = write_synthetic_food101(tmp.path(), o);
  EXPECT_EQ(summary.images, 48);
  EXPECT_EQ(summary.test_images, 12);  // 25% of each class
  EXPECT_EQ(summary.train_images, 36);
  const auto train = Food101Index::load(tmp.path(), "train");
  const auto test = Food101Index::load(tmp.path(), "test");
  EXPECT_EQ(train.size(), 36);
  EXPECT_EQ(test.size(), 12);
  EXPECT_EQ(train.num_classes(), 4);
  EXPECT_EQ(train.classes()[0], "apple_pie");
  // Food-like sizes: longest side 512, the other in [340, 512], mean file size 25-55 KB.
  JpegDecoder decoder;
  double bytes = 0;
  for (const auto& s : train.samples()) {
    const auto data = test_util::read_bytes(s.path);
    bytes += static_cast<double>(data.size());
    DecodeInfo info;
    decoder.decode_full(data.data(), data.size(), s.path.string(), &info);
    EXPECT_EQ(std::max(info.image_width, info.image_height), 512);
    EXPECT_GE(std::min(info.image_width, info.image_height), 340);
  }
  const double mean_kb = bytes / train.size() / 1024.0;
  EXPECT_GT(mean_kb, 25.0);
  EXPECT_LT(mean_kb, 55.0);
  // torchvision's Food101 reads the json form: same lists.
  std::ifstream j(summary.dataset_dir / "meta" / "train.json");
  const auto json = nlohmann::json::parse(j);
  EXPECT_EQ(json.size(), 4u);
  EXPECT_EQ(json["apple_pie"].size(), 9u);
}

TEST(SyntheticFoodTest, DeterministicForASeedWhateverTheThreadCount) {
  test_util::TempDir a, b, c;
  SyntheticFoodOptions o;
  o.classes = 2;
  o.per_class = 5;
  o.threads = 1;
  write_synthetic_food101(a.path(), o);
  o.threads = 3;
  write_synthetic_food101(b.path(), o);
  o.seed = 99;
  write_synthetic_food101(c.path(), o);
  const auto index = Food101Index::load(a.path(), "train");
  int differ = 0;
  for (const auto& s : index.samples()) {
    const fs::path rel = fs::relative(s.path, a.path());
    EXPECT_EQ(test_util::read_bytes(s.path), test_util::read_bytes(b.path() / rel)) << rel;
    differ += test_util::read_bytes(s.path) != test_util::read_bytes(c.path() / rel);
  }
  EXPECT_EQ(differ, index.size());
}

TEST(SyntheticFoodTest, RejectsBadOptions) {
  test_util::TempDir tmp;
  SyntheticFoodOptions o;
  o.per_class = 0;
  EXPECT_THROW(write_synthetic_food101(tmp.path(), o), std::invalid_argument);
}

}  // namespace
}  // namespace data_pipeline
