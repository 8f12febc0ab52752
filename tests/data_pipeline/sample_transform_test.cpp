// Tests for SampleTransform: exact normalisation and layout, flip, dtypes, fallback, errors and
// stage times; read_file's refusals (FIFOs, devices, files above the size cap).
#include "data_pipeline/sample_transform.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <opencv2/imgproc.hpp>

#include "common/hash64.h"
#include "data_pipeline/data_error.h"
#include "data_pipeline/synthetic/jpeg_encoder.h"
#include "data_pipeline/synthetic/synthetic_food.h"
#include "tests/support/test_util.h"

#if defined(WORKLOAD_HAVE_IMGCODECS)
#include <opencv2/imgcodecs.hpp>
#endif

namespace data_pipeline {
namespace {

std::vector<std::uint8_t> sample_jpeg(int item = 1) {
  const cv::Mat rgb = make_synthetic_food_image(3, 1, item);
  return encode_jpeg(rgb.data, rgb.cols, rgb.rows, 3, rgb.step[0]);
}

TransformOptions options(int size, HostDType dtype = HostDType::kFloat32,
                         DecodeMode mode = DecodeMode::kFusedRoi) {
  TransformOptions o;
  o.image_size = size;
  o.dtype = dtype;
  o.decode_mode = mode;
  return o;
}

TEST(SampleTransformTest, MatchesCropResizeNormalizeOfFullDecodeExactly) {
  const auto bytes = sample_jpeg();
  const int s = 64;
  SampleTransform transform(options(s, HostDType::kFloat32, DecodeMode::kFull));
  for (std::uint64_t i = 0; i < 20; ++i) {
    std::vector<float> out(static_cast<size_t>(s) * s * 3);
    CounterRng rng(9, 0, i, CounterRng::kAugment);
    transform.apply(bytes.data(), bytes.size(), "a.jpg", rng, out.data());

    // Independent reconstruction: full decode, crop, resize, flip, ToTensor + Normalize.
    JpegDecoder decoder;
    const RgbView full = decoder.decode_full(bytes.data(), bytes.size(), "a.jpg");
    CounterRng same(9, 0, i, CounterRng::kAugment);
    const AugmentParams p = sample_augment(same, full.width, full.height);
    const cv::Mat img(full.height, full.width, CV_8UC3, const_cast<std::uint8_t*>(full.data),
                      full.stride);
    cv::Mat resized;
    cv::resize(img(cv::Rect(p.crop.x, p.crop.y, p.crop.width, p.crop.height)), resized,
               cv::Size(s, s), 0, 0, resize_interpolation(p.crop.width, p.crop.height, s));
    if (p.flip) cv::flip(resized, resized, 1);
    for (int y = 0; y < s; ++y) {
      for (int x = 0; x < s; ++x) {
        for (int c = 0; c < 3; ++c) {
          const float v = static_cast<float>(resized.at<cv::Vec3b>(y, x)[c]) / 255.0f;
          const float expected = (v - kImageNetMean[c]) / kImageNetStd[c];
          ASSERT_EQ(out[(static_cast<size_t>(y) * s + x) * 3 + c], expected)
              << "sample " << i << " at " << x << "," << y << "," << c;
        }
      }
    }
  }
}

TEST(SampleTransformTest, BilinearUpToTwiceTheSizeAreaBeyond) {
  EXPECT_EQ(resize_interpolation(100, 100, 224), cv::INTER_LINEAR);  // enlarging
  EXPECT_EQ(resize_interpolation(448, 300, 224), cv::INTER_LINEAR);  // exactly 2x: box
  EXPECT_EQ(resize_interpolation(449, 300, 224), cv::INTER_AREA);
  EXPECT_EQ(resize_interpolation(300, 1000, 224), cv::INTER_AREA);
}

TEST(SampleTransformTest, FlipMirrorsTheSameCrop) {
  const auto bytes = sample_jpeg();
  TransformOptions no = options(48), yes = options(48);
  no.augment.flip_probability = 0.0;
  yes.augment.flip_probability = 1.0;
  SampleTransform a(no), b(yes);
  std::vector<float> pa(48 * 48 * 3), pb(48 * 48 * 3);
  CounterRng ra(1, 1, 1, CounterRng::kAugment), rb(1, 1, 1, CounterRng::kAugment);
  a.apply(bytes.data(), bytes.size(), "x.jpg", ra, pa.data());
  b.apply(bytes.data(), bytes.size(), "x.jpg", rb, pb.data());
  for (int y = 0; y < 48; ++y) {
    for (int x = 0; x < 48; ++x) {
      for (int c = 0; c < 3; ++c) {
        ASSERT_EQ(pa[(y * 48 + x) * 3 + c], pb[(y * 48 + (47 - x)) * 3 + c]);
      }
    }
  }
}

TEST(SampleTransformTest, Uint8OutputIsTheFloatOutputBeforeNormalisation) {
  const auto bytes = sample_jpeg();
  SampleTransform f(options(32)), u(options(32, HostDType::kUInt8));
  EXPECT_EQ(f.sample_bytes(), 32u * 32 * 3 * 4);
  EXPECT_EQ(u.sample_bytes(), 32u * 32 * 3);
  std::vector<float> pf(32 * 32 * 3);
  std::vector<std::uint8_t> pu(32 * 32 * 3);
  CounterRng r1(4, 0, 7, CounterRng::kAugment), r2(4, 0, 7, CounterRng::kAugment);
  const auto df = f.apply(bytes.data(), bytes.size(), "x.jpg", r1, pf.data());
  const auto du = u.apply(bytes.data(), bytes.size(), "x.jpg", r2, pu.data());
  for (size_t i = 0; i < pu.size(); ++i) {
    const int c = static_cast<int>(i % 3);
    ASSERT_EQ(pf[i], (pu[i] / 255.0f - kImageNetMean[c]) / kImageNetStd[c]);
  }
  EXPECT_EQ(df, common::hash64(pf.data(), pf.size() * 4));
  EXPECT_EQ(du, common::hash64(pu.data(), pu.size()));
}

TEST(SampleTransformTest, NchwIsTheChannelsLastSampleTransposed) {
  for (const HostDType dtype : {HostDType::kFloat32, HostDType::kUInt8}) {
    TransformOptions hwc = options(40, dtype), chw = options(40, dtype);
    chw.layout = ImageLayout::kNchw;
    SampleTransform a(hwc), b(chw);
    const std::size_t elem = dtype == HostDType::kFloat32 ? 4 : 1, n = 40 * 40 * 3;
    for (std::uint64_t image = 0; image < 6; ++image) {  // flipped and not
      const auto bytes = sample_jpeg(static_cast<int>(image % 3));
      std::vector<std::uint8_t> pa(n * elem), pb(n * elem);
      CounterRng r1(9, 1, image, CounterRng::kAugment), r2(9, 1, image, CounterRng::kAugment);
      a.apply(bytes.data(), bytes.size(), "x.jpg", r1, pa.data());
      b.apply(bytes.data(), bytes.size(), "x.jpg", r2, pb.data());
      std::size_t mismatches = 0;
      for (std::size_t p = 0; p < 40 * 40; ++p) {
        for (std::size_t c = 0; c < 3; ++c) {
          mismatches += std::memcmp(pa.data() + (p * 3 + c) * elem,
                                    pb.data() + (c * 40 * 40 + p) * elem, elem) != 0;
        }
      }
      EXPECT_EQ(mismatches, 0u) << "image " << image;
    }
  }
}

TEST(SampleTransformTest, DigestDependsOnContent) {
  SampleTransform t(options(32));
  std::vector<float> out(32 * 32 * 3);
  const auto a = sample_jpeg(1), b = sample_jpeg(2);
  CounterRng r1(1, 0, 0, 1), r2(1, 0, 0, 1);
  EXPECT_NE(t.apply(a.data(), a.size(), "a", r1, out.data()),
            t.apply(b.data(), b.size(), "b", r2, out.data()));
}

TEST(SampleTransformTest, NonJpegFilesUseTheFallbackOrFailClearly) {
  const cv::Mat rgb = make_synthetic_food_image(3, 2, 2);
  test_util::TempDir tmp;
  SampleTransform t(options(32));
  std::vector<float> out(32 * 32 * 3);
  CounterRng rng(1, 0, 0, 1);
#if defined(WORKLOAD_HAVE_IMGCODECS)
  std::vector<std::uint8_t> png;
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  ASSERT_TRUE(cv::imencode(".png", bgr, png));
  test_util::write_file(tmp / "png_named.jpg", png);
  ASSERT_TRUE(SampleTransform::has_fallback_decoder());
  DecodeInfo info;
  t.apply_file((tmp / "png_named.jpg").string(), rng, out.data(), &info);
  EXPECT_EQ(info.image_width, rgb.cols);
  EXPECT_EQ(info.image_height, rgb.rows);
#else
  EXPECT_FALSE(SampleTransform::has_fallback_decoder());
#endif
  // A format outside the fallback's (JPEG, PNG, BMP, WebP, TIFF, PNM) is a DataError before any
  // codec sees it: this DICOM signature, malformed, made Debian's OpenCV call GDCM, whose reader
  // asserted and aborted the process (an input the fuzzer found).
  std::vector<std::uint8_t> dicom = {':', '/'};
  dicom.resize(127, 0xD8);
  const std::string tail =
      "\xBA"
      "DICM/";  // "DICM" at byte 128: DICOM's signature
  dicom.insert(dicom.end(), tail.begin(), tail.end());
  test_util::write_file(tmp / "dicom.jpg", dicom);
  try {
    t.apply_file((tmp / "dicom.jpg").string(), rng, out.data());
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("dicom.jpg"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3A 2F D8 D8"), std::string::npos) << e.what();
  }
#if defined(WORKLOAD_HAVE_IMGCODECS)
  // The fallback's other formats decode: BMP here besides the PNG above.
  std::vector<std::uint8_t> bmp;
  ASSERT_TRUE(cv::imencode(".bmp", bgr, bmp));
  test_util::write_file(tmp / "bmp_named.jpg", bmp);
  DecodeInfo bmp_info;
  t.apply_file((tmp / "bmp_named.jpg").string(), rng, out.data(), &bmp_info);
  EXPECT_EQ(bmp_info.image_width, rgb.cols);
#endif
  test_util::write_text(tmp / "text.jpg", "this is not an image at all\n");
  try {
    t.apply_file((tmp / "text.jpg").string(), rng, out.data());
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("text.jpg"), std::string::npos) << e.what();
  }
  // The cap on a file's size is the caller's (loader_bench --breakdown passes --max-image-mb).
  try {
    t.apply_file((tmp / "text.jpg").string(), rng, out.data(), nullptr, nullptr, /*max_bytes=*/8);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-image-mb"), std::string::npos) << e.what();
  }
}

TEST(SampleTransformTest, FileErrorsNameTheFile) {
  test_util::TempDir tmp;
  SampleTransform t(options(32));
  std::vector<float> out(32 * 32 * 3);
  CounterRng rng(1, 0, 0, 1);
  test_util::write_text(tmp / "empty.jpg", "");
  std::filesystem::create_directories(tmp / "dir.jpg");
  const std::pair<std::string, std::string> cases[] = {
      {"empty.jpg", "empty file"}, {"dir.jpg", "directory"}, {"missing.jpg", "cannot open"}};
  for (const auto& [name, fragment] : cases) {
    try {
      t.apply_file((tmp / name).string(), rng, out.data());
      FAIL() << "expected DataError for " << name;
    } catch (const DataError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(name), std::string::npos) << what;
      EXPECT_NE(what.find(fragment), std::string::npos) << what;
    }
  }
}

TEST(SampleTransformTest, TimesFillEveryStageWithinTheCallsWallTime) {
  const auto bytes = sample_jpeg();
  test_util::TempDir tmp;
  test_util::write_file(tmp / "a.jpg", bytes);
  const int s = 48;
  SampleTransform t(options(s));
  std::vector<float> out(static_cast<size_t>(s) * s * 3);
  for (std::uint64_t i = 0; i < 8; ++i) {
    CounterRng rng(3, 0, i, CounterRng::kAugment);
    DecodeInfo info;
    TransformTimes times;
    const auto start = std::chrono::steady_clock::now();
    t.apply_file((tmp / "a.jpg").string(), rng, out.data(), &info, &times);
    const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count();
    // The decoded region, in scaled pixels, is not already s x s: cv::resize really runs.
    const double scale = info.scale_num / 8.0;
    ASSERT_FALSE(std::lround((info.region_x1 - info.region_x0) * scale) == s &&
                 std::lround((info.region_y1 - info.region_y0) * scale) == s)
        << "sample " << i << " needs no resize";
    EXPECT_GT(times.read_ns, 0);
    EXPECT_GT(times.decode_ns, 0);
    EXPECT_GT(times.resize_ns, 0);
    EXPECT_GT(times.write_ns, 0);
    EXPECT_GT(times.digest_ns, 0);
    EXPECT_LE(times.total_ns(), wall);

    // From memory there is no read; stale values from the previous call are cleared.
    CounterRng again(3, 0, i, CounterRng::kAugment);
    t.apply(bytes.data(), bytes.size(), "a.jpg", again, out.data(), nullptr, &times);
    EXPECT_EQ(times.read_ns, 0);
    EXPECT_GT(times.decode_ns, 0);
  }
}

TEST(SampleTransformTest, TimesDoNotChangeTheOutput) {
  const auto bytes = sample_jpeg(2);
  test_util::TempDir tmp;
  test_util::write_file(tmp / "b.jpg", bytes);
  for (const HostDType dtype : {HostDType::kFloat32, HostDType::kUInt8}) {
    SampleTransform plain(options(40, dtype)), timed(options(40, dtype));
    std::vector<std::uint8_t> a(plain.sample_bytes()), b(timed.sample_bytes());
    for (std::uint64_t i = 0; i < 16; ++i) {  // enough draws for both flips and several scales
      CounterRng ra(5, 1, i, CounterRng::kAugment), rb(5, 1, i, CounterRng::kAugment);
      TransformTimes times;
      const auto da = plain.apply(bytes.data(), bytes.size(), "b.jpg", ra, a.data());
      const auto db =
          timed.apply(bytes.data(), bytes.size(), "b.jpg", rb, b.data(), nullptr, &times);
      EXPECT_EQ(da, db) << "sample " << i;
      ASSERT_EQ(a, b) << "sample " << i;

      CounterRng fa(5, 2, i, CounterRng::kAugment), fb(5, 2, i, CounterRng::kAugment);
      const auto path = (tmp / "b.jpg").string();
      EXPECT_EQ(plain.apply_file(path, fa, a.data()),
                timed.apply_file(path, fb, b.data(), nullptr, &times))
          << "sample " << i;
      ASSERT_EQ(a, b) << "sample " << i;
    }
  }
}

// --- read_file --------------------------------------------------------------------------------

// Ends the test binary (SIGALRM) if it is still running after `seconds`: a regression that blocks
// in open() fails within seconds, not at CTest's TIMEOUT.
struct HangGuard {
  explicit HangGuard(unsigned seconds) { alarm(seconds); }
  ~HangGuard() { alarm(0); }
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The DataError read_file throws for `path` (with `max_bytes`), or "" when it reads the file.
std::string read_file_error(const std::string& path, std::uint64_t max_bytes) {
  std::vector<std::uint8_t> buffer;
  try {
    read_file(path, buffer, max_bytes);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(SampleTransformTest, ReadFileRefusesAFifoAtOnceWithoutWaitingForAWriter) {
  const HangGuard guard(60);
  test_util::TempDir tmp;
  const std::string fifo = (tmp / "fifo.jpg").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const auto start = std::chrono::steady_clock::now();
  const std::string error = read_file_error(fifo, std::uint64_t{1} << 20);
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_NE(error.find(fifo), std::string::npos) << error;
  EXPECT_NE(error.find("expected a regular file, got a FIFO"), std::string::npos) << error;
}

TEST(SampleTransformTest, ReadFileRefusesADeviceNamingItsKind) {
  const std::string error = read_file_error("/dev/zero", std::uint64_t{1} << 20);
  EXPECT_NE(error.find("/dev/zero: expected a regular file, got a character device"),
            std::string::npos)
      << error;
}

TEST(SampleTransformTest, ReadFileRefusesAFileAboveTheCapBeforeReadingIt) {
  // A sparse 2 GiB file: reading it would take seconds and 2 GiB of memory.
  test_util::TempDir tmp;
  const std::string big = (tmp / "big.jpg").string();
  test_util::write_text(big, "");
  std::filesystem::resize_file(big, std::uint64_t{2} << 30);
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  std::vector<std::uint8_t> buffer;
  try {
    read_file(big, buffer);  // the default cap, 64 MiB
  } catch (const DataError& e) {
    error = e.what();
  }
  const double seconds = seconds_since(start);
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(seconds, 1.0);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024) << "KiB of peak RSS grown";
  EXPECT_EQ(error, big +
                       ": expected an image file of at most 67108864 bytes (64 MiB, "
                       "--max-image-mb raises it), got 2147483648 bytes (2048 MiB)");
}

TEST(SampleTransformTest, ReadFileReadsAFileAtTheCap) {
  test_util::TempDir tmp;
  const std::string file = (tmp / "at_cap.jpg").string();
  std::vector<std::uint8_t> bytes(1000);
  for (std::size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<std::uint8_t>(k * 7);
  test_util::write_file(file, bytes);
  std::vector<std::uint8_t> read;
  read_file(file, read, 1000);
  EXPECT_EQ(read, bytes);
  const std::string error = read_file_error(file, 999);
  EXPECT_NE(error.find("at most 999 bytes"), std::string::npos) << error;
  EXPECT_NE(error.find("got 1000 bytes"), std::string::npos) << error;
}

}  // namespace
}  // namespace data_pipeline
