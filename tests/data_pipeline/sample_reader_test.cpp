// Tests for SampleReader: keyed transforms, the error policy, deterministic replacement under the
// skip policy, the message when nothing decodes, and the file size cap.
#include "data_pipeline/sample_reader.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>

#include "data_pipeline/counter_rng.h"
#include "data_pipeline/data_error.h"
#include "data_pipeline/synthetic/jpeg_encoder.h"
#include "tests/support/test_util.h"

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

// --- stage(): the --decode gpu counterpart of read() -------------------------------------------

// Re-encodes image `i` of the dataset as the given kind (pixels of a fixed pattern).
void rewrite(const std::filesystem::path& file, const JpegEncodeOptions& o, int width = 120,
             int height = 90) {
  const int channels = o.color == JpegColor::kGrayscale ? 1 : o.color == JpegColor::kYCbCr ? 3 : 4;
  std::vector<std::uint8_t> px(static_cast<std::size_t>(width) * height * channels);
  for (std::size_t k = 0; k < px.size(); ++k) px[k] = static_cast<std::uint8_t>(k * 13 % 251);
  test_util::write_file(file, encode_jpeg(px.data(), width, height, channels,
                                          static_cast<std::size_t>(width) * channels, o));
}

TEST_F(SampleReaderTest, StagingDrawsTheCpuPathsCropAndKeepsTheBytes) {
  SampleReader reader(index_, options_);
  SampleTransform transform(options_.transform);
  options_.transform.image_size = 224;  // a sample area larger than the files: bytes stay inside
  SampleReader roomy(index_, options_);
  std::vector<std::uint8_t> area(sample_bytes(options_.transform)), want = buffer();
  for (std::int64_t epoch : {0, 2}) {
    for (std::int64_t i : {0, 3, 10}) {
      StagedImage st;
      const SampleResult r = roomy.stage(epoch, i, area.data(), st);
      ASSERT_EQ(st.route, DecodeRoute::kHardware) << st.reason;
      EXPECT_EQ(r.label, (*index_)[i].label);
      EXPECT_EQ(st.source_index, i);
      const auto file = test_util::read_bytes((*index_)[i].path);
      ASSERT_EQ(st.size, file.size());
      EXPECT_TRUE(st.overflow.empty());
      EXPECT_EQ(std::memcmp(st.bytes(area.data()), file.data(), file.size()), 0);
      // The CPU path's crop for the same key; the flip is the next draw of the same generator.
      CounterRng rng(31, static_cast<std::uint64_t>(epoch), static_cast<std::uint64_t>(i),
                     CounterRng::kAugment);
      DecodeInfo info;
      transform.apply_file((*index_)[i].path.string(), rng, want.data(), &info);
      EXPECT_EQ(st.params.crop, info.crop);
      EXPECT_EQ(st.image_width, info.image_width);
      EXPECT_EQ(st.image_height, info.image_height);
      CounterRng again(31, static_cast<std::uint64_t>(epoch), static_cast<std::uint64_t>(i),
                       CounterRng::kAugment);
      EXPECT_EQ(st.params.flip, sample_augment(again, info.image_width, info.image_height).flip);
      // Deterministic, and a different crop is a different digest.
      StagedImage again_st;
      EXPECT_EQ(roomy.stage(epoch, i, area.data(), again_st).digest, r.digest);
    }
  }
  // A 16 px sample area is smaller than any file: the bytes go to the overflow buffer.
  StagedImage st;
  auto small = buffer();
  reader.stage(0, 1, small.data(), st);
  ASSERT_EQ(st.route, DecodeRoute::kHardware);
  EXPECT_EQ(st.overflow, test_util::read_bytes((*index_)[1].path));
  EXPECT_EQ(st.bytes(small.data()), st.overflow.data());
}

TEST_F(SampleReaderTest, WhatTheEnginesCannotTakeIsDecodedAsReadDoes) {
  JpegEncodeOptions progressive;
  progressive.progressive = true;
  JpegEncodeOptions s411;
  s411.subsampling = ChromaSubsampling::k411;
  JpegEncodeOptions cmyk;
  cmyk.color = JpegColor::kCmykAdobe;
  rewrite((*index_)[2].path, progressive);
  rewrite((*index_)[3].path, s411);
  rewrite((*index_)[4].path, cmyk);
  // Cut short: its end-of-image marker is gone (the CPU path refuses it).
  auto cut = test_util::read_bytes((*index_)[6].path);
  cut.resize(cut.size() - 40);
  test_util::write_file((*index_)[6].path, cut);
  options_.on_bad_image = BadImagePolicy::kSkip;
  SampleReader stager(index_, options_), reader(index_, options_);
  const std::vector<std::pair<std::int64_t, std::string>> expected = {
      {2, "progressive"}, {3, "4:1:1 subsampling"}, {4, "CMYK"}};
  for (const auto& [i, reason] : expected) {
    auto staged = buffer(), read = buffer();
    StagedImage st;
    const SampleResult a = stager.stage(1, i, staged.data(), st);
    const SampleResult b = reader.read(1, i, read.data());
    EXPECT_EQ(st.route, DecodeRoute::kCpu);
    EXPECT_EQ(std::string(st.reason), reason);
    EXPECT_EQ(staged, read) << "image " << i;
    EXPECT_EQ(a.digest, b.digest);
  }
  // The stream cut short is replaced exactly as read() replaces it.
  auto staged = buffer(), read = buffer();
  StagedImage st;
  const SampleResult a = stager.stage(1, 6, staged.data(), st);
  const SampleResult b = reader.read(1, 6, read.data());
  ASSERT_TRUE(a.skipped.has_value());
  ASSERT_TRUE(b.skipped.has_value());
  EXPECT_EQ(a.skipped->replacement, b.skipped->replacement);
  EXPECT_EQ(a.label, b.label);
  EXPECT_NE(st.source_index, 6);
}

TEST_F(SampleReaderTest, StagingABadImageFollowsThePolicy) {
  corrupt(4);
  {
    SampleReader reader(index_, options_);
    auto dst = buffer();
    StagedImage st;
    try {
      reader.stage(0, 4, dst.data(), st);
      FAIL() << "expected a DataError";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find((*index_)[4].path.string()), std::string::npos);
    }
  }
  options_.on_bad_image = BadImagePolicy::kSkip;
  SampleReader stager(index_, options_), reader(index_, options_);
  auto a = buffer(), b = buffer();
  StagedImage st;
  const SampleResult ra = stager.stage(2, 4, a.data(), st);
  const SampleResult rb = reader.read(2, 4, b.data());
  ASSERT_TRUE(ra.skipped.has_value());
  EXPECT_EQ(ra.skipped->replacement, rb.skipped->replacement);
  EXPECT_EQ(ra.label, rb.label);
  EXPECT_EQ((*index_)[st.source_index].path.string(), ra.skipped->replacement);
}

// --- the file size cap (max_image_mb) ------------------------------------------------------------

// Image `i` through read() or, with `staged`, stage().
SampleResult read_or_stage(SampleReader& reader, std::int64_t i, bool staged,
                           std::vector<std::uint8_t>& dst) {
  StagedImage st;
  return staged ? reader.stage(0, i, dst.data(), st) : reader.read(0, i, dst.data());
}

TEST_F(SampleReaderTest, AFileAboveTheCapIsABadImageRefusedUnreadByReadAndStage) {
  // A JPEG grown to a sparse 1 GiB under a 1 MiB cap: reading it would take a second and 1 GiB.
  const std::string big = (*index_)[4].path.string();
  std::filesystem::resize_file(big, std::uint64_t{1} << 30);
  options_.max_image_mb = 1;
  const std::string expected = big +
                               ": expected an image file of at most 1048576 bytes (1 MiB, "
                               "--max-image-mb raises it), got 1073741824 bytes (1024 MiB)";
  const auto start = std::chrono::steady_clock::now();
  for (const bool staged : {false, true}) {
    SCOPED_TRACE(staged ? "stage" : "read");
    auto dst = buffer();
    options_.on_bad_image = BadImagePolicy::kError;
    SampleReader strict(index_, options_);
    try {
      read_or_stage(strict, 4, staged, dst);
      FAIL() << "expected a DataError";
    } catch (const DataError& e) {
      EXPECT_EQ(e.what(), expected);
    }
    options_.on_bad_image = BadImagePolicy::kSkip;
    SampleReader lenient(index_, options_);
    const SampleResult r = read_or_stage(lenient, 4, staged, dst);
    ASSERT_TRUE(r.skipped.has_value());
    EXPECT_EQ(r.skipped->path, big);
    EXPECT_EQ(r.skipped->reason, expected);
    EXPECT_NE(r.skipped->replacement, big);
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
}

TEST_F(SampleReaderTest, AFileAtTheCapIsRead) {
  options_.max_image_mb = 1;
  SampleReader reader(index_, options_);
  auto want = buffer(), got = buffer();
  const SampleResult original = reader.read(0, 4, want.data());
  // The same JPEG with zeros after its end-of-image marker, to exactly 1 MiB: the same pixels.
  const auto path = (*index_)[4].path;
  auto bytes = test_util::read_bytes(path);
  bytes.resize(std::size_t{1} << 20, 0);
  test_util::write_file(path, bytes);
  const SampleResult r = reader.read(0, 4, got.data());
  EXPECT_FALSE(r.skipped.has_value());
  EXPECT_EQ(r.digest, original.digest);
  EXPECT_EQ(got, want);
  StagedImage st;
  EXPECT_FALSE(reader.stage(0, 4, got.data(), st).skipped.has_value());
  EXPECT_EQ(st.source_index, 4);
  EXPECT_EQ(st.route, DecodeRoute::kHardware);  // zeros after the marker are padding
  EXPECT_EQ(st.overflow, bytes);                // the whole file, staged
  bytes.push_back(0);                           // one byte over
  test_util::write_file(path, bytes);
  EXPECT_THROW(reader.read(0, 4, got.data()), DataError);
}

TEST_F(SampleReaderTest, TheCapIsValidated) {
  for (const std::int64_t mb : {std::int64_t{0}, std::int64_t{-1}, kMaxImageMbCeiling + 1}) {
    options_.max_image_mb = mb;
    try {
      SampleReader reader(index_, options_);
      FAIL() << "expected std::invalid_argument for " << mb;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()),
                "max_image_mb: expected in [1, 1024], got " + std::to_string(mb));
    }
  }
  options_.max_image_mb = kMaxImageMbCeiling;
  EXPECT_NO_THROW(SampleReader(index_, options_));
}

}  // namespace
}  // namespace data_pipeline
