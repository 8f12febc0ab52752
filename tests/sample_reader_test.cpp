// Tests for SampleReader: keyed transforms, the error policy, deterministic replacement under the
// skip policy, and the message when nothing decodes.
#include "data_pipeline/sample_reader.h"

#include <gtest/gtest.h>

#include <vector>

#include "data_pipeline/counter_rng.h"
#include "data_pipeline/data_error.h"
#include "tests/test_util.h"

namespace data_pipeline {
namespace {

class SampleReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test_util::make_dataset(tmp_.path(), 2, 6, 9, 0.0);  // 12 training images
    index_ = std::make_shared<const Food101Index>(Food101Index::load(tmp_.path(), "train"));
    options_.seed = 31;
    options_.transform.image_size = 16;
  }
  void corrupt(std::int64_t i) { test_util::write_text((*index_)[i].path, "not an image"); }
  std::vector<std::uint8_t> buffer() const {
    return std::vector<std::uint8_t>(sample_bytes(options_.transform));
  }

  test_util::TempDir tmp_;
  std::shared_ptr<const Food101Index> index_;
  LoaderOptions options_;
};

TEST_F(SampleReaderTest, ASampleIsTheTransformKeyedBySeedEpochAndImage) {
  SampleReader reader(index_, options_);
  SampleTransform transform(options_.transform);
  auto got = buffer(), want = buffer();
  for (std::int64_t epoch : {0, 3}) {
    for (std::int64_t i : {0, 5, 11}) {
      const SampleResult r = reader.read(epoch, i, got.data());
      CounterRng rng(31, static_cast<std::uint64_t>(epoch), static_cast<std::uint64_t>(i),
                     CounterRng::kAugment);
      EXPECT_EQ(r.digest, transform.apply_file((*index_)[i].path.string(), rng, want.data()));
      EXPECT_EQ(got, want);
      EXPECT_EQ(r.label, (*index_)[i].label);
      EXPECT_FALSE(r.skipped.has_value());
    }
  }
}

TEST_F(SampleReaderTest, UnderTheErrorPolicyABadImageThrowsNamingIt) {
  corrupt(4);
  SampleReader reader(index_, options_);
  auto dst = buffer();
  try {
    reader.read(0, 4, dst.data());
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find((*index_)[4].path.string()), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(reader.read(0, 5, dst.data()));  // the reader is still usable
}

TEST_F(SampleReaderTest, UnderTheSkipPolicyTheReplacementIsDeterministic) {
  corrupt(4);
  options_.on_bad_image = BadImagePolicy::kSkip;
  SampleReader a(index_, options_), b(index_, options_);
  auto da = buffer(), db = buffer(), want = buffer();
  b.read(1, 7, db.data());  // a different history must not matter
  for (std::int64_t epoch : {0, 1, 2}) {
    const SampleResult ra = a.read(epoch, 4, da.data());
    const SampleResult rb = b.read(epoch, 4, db.data());
    ASSERT_TRUE(ra.skipped.has_value());
    ASSERT_TRUE(rb.skipped.has_value());
    EXPECT_EQ(ra.skipped->replacement, rb.skipped->replacement);
    EXPECT_EQ(ra.digest, rb.digest);
    EXPECT_EQ(da, db);
    EXPECT_EQ(ra.skipped->path, (*index_)[4].path.string());
    EXPECT_EQ(ra.skipped->dataset_index, 4);
    EXPECT_EQ(ra.skipped->epoch, epoch);
    EXPECT_EQ(ra.skipped->reason.rfind(ra.skipped->path + ": ", 0), 0u) << ra.skipped->reason;
    // The replacement is transformed with its own key, and carries its own label.
    std::int64_t used = -1;
    for (std::int64_t i = 0; i < index_->size(); ++i) {
      if ((*index_)[i].path.string() == ra.skipped->replacement) used = i;
    }
    ASSERT_GE(used, 0);
    ASSERT_NE(used, 4);
    EXPECT_EQ(ra.label, (*index_)[used].label);
    EXPECT_EQ(ra.digest, a.read(epoch, used, want.data()).digest);
    EXPECT_EQ(da, want);
  }
}

TEST_F(SampleReaderTest, WhenNoReplacementDecodesTheErrorSaysSo) {
  for (std::int64_t i = 0; i < index_->size(); ++i) corrupt(i);
  options_.on_bad_image = BadImagePolicy::kSkip;
  SampleReader reader(index_, options_);
  auto dst = buffer();
  try {
    reader.read(0, 2, dst.data());
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find((*index_)[2].path.string()), std::string::npos) << what;
    EXPECT_NE(what.find("no replacement image decoded after 32 attempts"), std::string::npos)
        << what;
  }
}

TEST_F(SampleReaderTest, InvalidTransformOptionsAreRejected) {
  options_.transform.image_size = 0;
  EXPECT_THROW(SampleReader(index_, options_), std::invalid_argument);
}

}  // namespace
}  // namespace data_pipeline
