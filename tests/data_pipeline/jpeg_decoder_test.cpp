// Tests for JpegDecoder: every JPEG kind decodes; ROI + DCT-scaled decode equals the matching
// crop/resize of a full decode; libjpeg errors and truncation become DataErrors naming the file.
#include "data_pipeline/jpeg_decoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <opencv2/imgproc.hpp>

#include "data_pipeline/counter_rng.h"
#include "data_pipeline/data_error.h"
#include "data_pipeline/synthetic/jpeg_encoder.h"
#include "data_pipeline/synthetic/synthetic_food.h"

#if defined(WORKLOAD_HAVE_IMGCODECS)
#include <opencv2/imgcodecs.hpp>
#endif

namespace data_pipeline {
namespace {

struct Kind {
  const char* name;
  int width;
  int height;
  JpegEncodeOptions options;
};

JpegEncodeOptions opts(ChromaSubsampling s, bool progressive = false, bool arithmetic = false,
                       int restart = 0, JpegColor color = JpegColor::kYCbCr) {
  JpegEncodeOptions o;
  o.quality = 90;
  o.subsampling = s;
  o.progressive = progressive;
  o.arithmetic = arithmetic;
  o.restart_interval = restart;
  o.color = color;
  return o;
}

std::vector<Kind> kinds() {
  using S = ChromaSubsampling;
  return {
      {"baseline_420", 512, 384, opts(S::k420)},
      {"baseline_422", 512, 384, opts(S::k422)},
      {"baseline_444", 384, 512, opts(S::k444)},
      {"baseline_440", 512, 384, opts(S::k440)},
      {"baseline_411", 512, 384, opts(S::k411)},
      {"progressive_420", 512, 384, opts(S::k420, true)},
      {"progressive_444", 512, 384, opts(S::k444, true)},
      {"restart_markers", 512, 384, opts(S::k420, false, false, 1)},
      {"arithmetic", 512, 384, opts(S::k420, false, true)},
      {"arithmetic_progressive", 512, 384, opts(S::k420, true, true)},
      {"grayscale", 512, 384, opts(S::k420, false, false, 0, JpegColor::kGrayscale)},
      {"grayscale_progressive", 400, 300, opts(S::k420, true, false, 0, JpegColor::kGrayscale)},
      {"cmyk_adobe", 512, 384, opts(S::k444, false, false, 0, JpegColor::kCmykAdobe)},
      {"ycck_adobe", 512, 384, opts(S::k420, false, false, 0, JpegColor::kYcckAdobe)},
      {"odd_size", 517, 389, opts(S::k420)},
      {"tiny_24x16", 24, 16, opts(S::k420)},
      {"large_4000x3000", 4000, 3000, opts(S::k420)},
  };
}

// Food-like content (smooth regions and edges) at the requested size. The synthetic images' pixel
// noise is blurred away: two correct resamplers (DCT scaling vs area averaging) disagree on
// uncorrelated noise by several grey levels, which would drown the geometry errors (a misplaced
// or mis-scaled crop) that these tests look for.
cv::Mat make_rgb(int width, int height, int seed) {
  cv::Mat base = make_synthetic_food_image(11, seed, seed);
  cv::GaussianBlur(base, base, cv::Size(0, 0), 1.5);
  cv::Mat out;
  cv::resize(base, out, cv::Size(width, height), 0, 0,
             width > base.cols ? cv::INTER_CUBIC : cv::INTER_AREA);
  return out;
}

// Inverted-ink CMYK (as Photoshop writes Adobe CMYK) whose exact conversion back is `rgb`:
// stored K = max(R, G, B), stored C = 255 * R / max(R, G, B), ...
cv::Mat rgb_to_inverted_cmyk(const cv::Mat& rgb) {
  cv::Mat out(rgb.rows, rgb.cols, CV_8UC4);
  for (int y = 0; y < rgb.rows; ++y) {
    for (int x = 0; x < rgb.cols; ++x) {
      const auto p = rgb.at<cv::Vec3b>(y, x);
      const int k = std::max({p[0], p[1], p[2], uchar(1)});
      out.at<cv::Vec4b>(y, x) =
          cv::Vec4b(uchar(std::lround(255.0 * p[0] / k)), uchar(std::lround(255.0 * p[1] / k)),
                    uchar(std::lround(255.0 * p[2] / k)), uchar(k));
    }
  }
  return out;
}

std::vector<std::uint8_t> encode_kind(const Kind& kind, cv::Mat* rgb_out = nullptr) {
  cv::Mat rgb = make_rgb(kind.width, kind.height, kind.width % 97);
  if (rgb_out) *rgb_out = rgb;
  switch (kind.options.color) {
    case JpegColor::kGrayscale: {
      cv::Mat gray;
      cv::cvtColor(rgb, gray, cv::COLOR_RGB2GRAY);
      if (rgb_out) cv::cvtColor(gray, *rgb_out, cv::COLOR_GRAY2RGB);
      return encode_jpeg(gray.data, gray.cols, gray.rows, 1, gray.step[0], kind.options);
    }
    case JpegColor::kCmykAdobe:
    case JpegColor::kYcckAdobe: {
      cv::Mat cmyk = rgb_to_inverted_cmyk(rgb);
      return encode_jpeg(cmyk.data, cmyk.cols, cmyk.rows, 4, cmyk.step[0], kind.options);
    }
    default:
      return encode_jpeg(rgb.data, rgb.cols, rgb.rows, 3, rgb.step[0], kind.options);
  }
}

cv::Mat view_to_mat(const RgbView& v) {
  return cv::Mat(v.height, v.width, CV_8UC3, const_cast<std::uint8_t*>(v.data), v.stride).clone();
}

double mean_abs_diff(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat d;
  cv::absdiff(a, b, d);
  const cv::Scalar s = cv::mean(d);
  return (s[0] + s[1] + s[2]) / 3.0;
}

cv::Mat resize_to(const cv::Mat& m, int size) {
  cv::Mat out;
  const bool shrink = m.cols > size && m.rows > size;
  cv::resize(m, out, cv::Size(size, size), 0, 0, shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
  return out;
}

struct Fixed {
  CropRect rect;
};
CropRect fixed_crop(void* ctx, int, int) { return static_cast<Fixed*>(ctx)->rect; }

class JpegDecoderKindTest : public ::testing::TestWithParam<Kind> {};

TEST_P(JpegDecoderKindTest, FullDecodeMatchesSourcePixels) {
  const Kind& kind = GetParam();
  cv::Mat rgb;
  const auto bytes = encode_kind(kind, &rgb);
  JpegDecoder decoder;
  DecodeInfo info;
  const cv::Mat full =
      view_to_mat(decoder.decode_full(bytes.data(), bytes.size(), kind.name, &info));
  ASSERT_EQ(full.cols, kind.width);
  ASSERT_EQ(full.rows, kind.height);
  EXPECT_EQ(info.progressive, kind.options.progressive);
  // Lossy coding at quality 90 (CMYK goes through two colour conversions, YCCK three).
  // A sanity bound (wrong channel order or a misplaced image is far above it); exactness is
  // checked against OpenCV's decoder below.
  EXPECT_LT(mean_abs_diff(full, rgb), 10.0) << kind.name;
#if defined(WORKLOAD_HAVE_IMGCODECS)
  // An independent decoder (OpenCV) agrees on the full image.
  cv::Mat bgr =
      cv::imdecode(cv::Mat(1, int(bytes.size()), CV_8UC1, (void*)bytes.data()), cv::IMREAD_COLOR);
  ASSERT_FALSE(bgr.empty());
  cv::Mat ref;
  cv::cvtColor(bgr, ref, cv::COLOR_BGR2RGB);
  EXPECT_LT(mean_abs_diff(full, ref), 1.0) << kind.name;
#endif
}

TEST_P(JpegDecoderKindTest, FusedRoiDecodeEqualsCropOfFullDecode) {
  const Kind& kind = GetParam();
  const auto bytes = encode_kind(kind);
  JpegDecoder full_decoder, roi_decoder;
  const cv::Mat full = view_to_mat(full_decoder.decode_full(bytes.data(), bytes.size(), kind.name));
  const int targets[] = {8, 32, 64, 224};
  int scales_seen = 0;
  double worst = 0;
  for (int t : targets) {
    for (std::uint64_t i = 0; i < 12; ++i) {
      CounterRng rng(5, static_cast<std::uint64_t>(t), i, CounterRng::kAugment);
      Fixed f{sample_augment(rng, kind.width, kind.height).crop};
      DecodeInfo info;
      const cv::Mat roi =
          view_to_mat(roi_decoder.decode(bytes.data(), bytes.size(), kind.name, fixed_crop, &f, t,
                                         t, DecodeMode::kFusedRoi, &info));
      // The scale is the smallest M/8 that keeps the crop at least t x t.
      const int m = info.scale_num;
      ASSERT_TRUE(m == 1 || m == 2 || m == 4 || m == 8) << m;  // the SIMD scales only
      if (m < 8) {
        EXPECT_GE(f.rect.width * m, t * 8);
        EXPECT_GE(f.rect.height * m, t * 8);
      }
      // 4:1:1 starts at 2/8 (see JpegDecoder::decode).
      const int min_scale = kind.options.subsampling == ChromaSubsampling::k411 &&
                                    kind.options.color == JpegColor::kYCbCr
                                ? 2
                                : 1;
      if (m > min_scale) {  // the next smaller fast scale would leave the crop too small
        EXPECT_TRUE(f.rect.width * (m / 2) < t * 8 || f.rect.height * (m / 2) < t * 8);
      }
      scales_seen |= 1 << m;
      {
        // Against a whole-image decode at the same DCT scale, the ROI path must be exact.
        Fixed whole{{0, 0, kind.width, kind.height}};
        DecodeInfo winfo;
        JpegDecoder scaled_decoder;
        // The largest size that scale m/8 still satisfies makes the decoder pick exactly m.
        const int sw = (kind.width * m + 7) / 8, sh = (kind.height * m + 7) / 8;
        const cv::Mat scaled = view_to_mat(
            scaled_decoder.decode(bytes.data(), bytes.size(), kind.name, fixed_crop, &whole,
                                  std::max(sw, 1), std::max(sh, 1), DecodeMode::kFusedRoi, &winfo));
        if (winfo.scale_num != m) continue;  // only for images a few pixels wide
        const int sx0 = int(std::lround(info.region_x0 * m / 8.0));
        const int sy0 = int(std::lround(info.region_y0 * m / 8.0));
        ASSERT_LE(sx0 + roi.cols, scaled.cols);
        ASSERT_LE(sy0 + roi.rows, scaled.rows);
        EXPECT_EQ(mean_abs_diff(roi, scaled(cv::Rect(sx0, sy0, roi.cols, roi.rows))), 0.0)
            << kind.name << " scale " << m << "/8 crop " << f.rect.x << "," << f.rect.y;
      }
      // The returned region is the crop with its edges on the scaled pixel grid.
      const double grid = 4.0 / m + 1e-9;
      EXPECT_LE(std::fabs(info.region_x0 - f.rect.x), grid);
      EXPECT_LE(std::fabs(info.region_y0 - f.rect.y), grid);
      EXPECT_LE(std::fabs(info.region_x1 - (f.rect.x + f.rect.width)), grid);
      EXPECT_LE(std::fabs(info.region_y1 - (f.rect.y + f.rect.height)), grid);
      // Compare with the full decode cropped to that same region, resized to the target.
      const int x0 = int(std::lround(info.region_x0)), y0 = int(std::lround(info.region_y0));
      const int x1 = int(std::lround(info.region_x1)), y1 = int(std::lround(info.region_y1));
      const cv::Mat ref_crop = full(cv::Rect(x0, y0, x1 - x0, y1 - y0));
      if (m == 8) {
        // Same scale: the ROI decode must reproduce the full decode's pixels exactly.
        ASSERT_EQ(roi.size(), ref_crop.size());
        EXPECT_EQ(mean_abs_diff(roi, ref_crop), 0.0)
            << kind.name << " crop " << f.rect.x << "," << f.rect.y;
      }
      // DCT-domain scaling and area averaging are different low-pass filters, so the outputs
      // differ slightly at sharp edges. Calibrate on the image itself: the fused output must be
      // much closer to the reference than the reference is to itself moved by one pixel, the
      // smallest geometry error (a misplaced crop, an off-by-one row) worth catching.
      const cv::Mat ref_t = resize_to(ref_crop, t);
      const double d = mean_abs_diff(resize_to(roi, t), ref_t);
      const double one_pixel =
          std::min(mean_abs_diff(ref_t(cv::Rect(1, 0, t - 1, t)), ref_t(cv::Rect(0, 0, t - 1, t))),
                   mean_abs_diff(ref_t(cv::Rect(0, 1, t, t - 1)), ref_t(cv::Rect(0, 0, t, t - 1))));
      worst = std::max(worst, d / one_pixel);
      // 4:1:1 chroma is rebuilt by plain replication at scaled sizes but by libjpeg's h4v1
      // upsampler at full size, a larger (still sub-pixel) filter difference.
      const double ratio = min_scale == 2 ? 0.9 : 0.7;
      EXPECT_LT(d, ratio * one_pixel) << kind.name << " target " << t << " scale " << m << "/8";
      EXPECT_LT(d, t >= 32 ? 4.0 : 8.0) << kind.name << " target " << t << " scale " << m << "/8";
    }
  }
  std::printf("%s: worst |fused - full| / |one-pixel shift| = %.3f\n", kind.name, worst);
  if (kind.width >= 512 && kind.width < 1000) {
    EXPECT_GT(__builtin_popcount(scales_seen), 2) << "too few scales tested";
  }
}

INSTANTIATE_TEST_SUITE_P(AllKinds, JpegDecoderKindTest, ::testing::ValuesIn(kinds()),
                         [](const auto& info) { return std::string(info.param.name); });

class JpegDecoderTest : public ::testing::Test {
 protected:
  std::vector<std::uint8_t> baseline(bool progressive = false) {
    Kind k{"b", 320, 240, opts(ChromaSubsampling::k420, progressive)};
    return encode_kind(k);
  }
  // Expects decode_full to throw a DataError naming "img.jpg" and containing `fragment`.
  void expect_error(const std::vector<std::uint8_t>& bytes, const std::string& fragment) {
    JpegDecoder decoder;
    try {
      decoder.decode_full(bytes.data(), bytes.size(), "dir/img.jpg");
      FAIL() << "expected DataError";
    } catch (const DataError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("dir/img.jpg"), std::string::npos) << what;
      EXPECT_NE(what.find(fragment), std::string::npos) << what;
    }
  }
};

TEST_F(JpegDecoderTest, TruncatedBaselineIsAnError) {
  auto bytes = baseline();
  bytes.resize(bytes.size() * 6 / 10);
  expect_error(bytes, "truncated");
}

TEST_F(JpegDecoderTest, TruncatedProgressiveIsAnError) {
  auto bytes = baseline(true);
  bytes.resize(bytes.size() / 2);
  expect_error(bytes, "truncated");
}

TEST_F(JpegDecoderTest, TruncationIsCaughtEvenWhenTheCropAvoidsTheMissingRows) {
  auto bytes = baseline();
  bytes.resize(bytes.size() * 9 / 10);
  JpegDecoder decoder;
  Fixed top{{0, 0, 32, 32}};  // rows that are all present
  EXPECT_THROW(decoder.decode(bytes.data(), bytes.size(), "x.jpg", fixed_crop, &top, 8, 8,
                              DecodeMode::kFusedRoi),
               DataError);
}

TEST_F(JpegDecoderTest, GarbageAfterSoiIsAnError) {
  std::vector<std::uint8_t> bytes = {0xFF, 0xD8, 0xFF};
  CounterRng rng(1, 2, 3, 4);
  for (int i = 0; i < 4000; ++i) bytes.push_back(static_cast<std::uint8_t>(rng.next_u64()));
  expect_error(bytes, "JPEG decode failed");
}

TEST_F(JpegDecoderTest, EmptyAndNonJpegInputs) {
  expect_error({}, "empty file");
  expect_error({'h', 'e', 'l', 'l', 'o'}, "not a JPEG");
}

TEST_F(JpegDecoderTest, TrailingBytesAfterEoiAreAccepted) {
  auto bytes = baseline();
  for (int i = 0; i < 1000; ++i) bytes.push_back(static_cast<std::uint8_t>(i));
  JpegDecoder decoder;
  EXPECT_NO_THROW(decoder.decode_full(bytes.data(), bytes.size(), "trailer.jpg"));
}

TEST_F(JpegDecoderTest, DecoderIsReusableAfterAnError) {
  auto good = baseline();
  auto bad = good;
  bad.resize(bad.size() / 3);
  JpegDecoder decoder;
  EXPECT_THROW(decoder.decode_full(bad.data(), bad.size(), "bad.jpg"), DataError);
  const RgbView v = decoder.decode_full(good.data(), good.size(), "good.jpg");
  EXPECT_EQ(v.width, 320);
  EXPECT_EQ(v.height, 240);
}

TEST_F(JpegDecoderTest, FusedDecodeReadsFewerPixelsForSmallTargets) {
  auto bytes = baseline();
  JpegDecoder decoder;
  Fixed whole{{0, 0, 320, 240}};
  DecodeInfo info;
  const RgbView v = decoder.decode(bytes.data(), bytes.size(), "x.jpg", fixed_crop, &whole, 40, 30,
                                   DecodeMode::kFusedRoi, &info);
  EXPECT_EQ(info.scale_num, 1);  // 320 * 1/8 = 40, 240 * 1/8 = 30
  EXPECT_EQ(v.width, 40);
  EXPECT_EQ(v.height, 30);
}

}  // namespace
}  // namespace data_pipeline
