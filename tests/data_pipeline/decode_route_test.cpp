// Tests for reading a JPEG's header without decoding it (every JPEG kind, truncated streams, a PNG
// named .jpg) and for the hardware decoder's routing table built on it.
#include "data_pipeline/decode_route.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data_pipeline/data_error.h"
#include "data_pipeline/jpeg_decoder.h"
#include "data_pipeline/synthetic/jpeg_encoder.h"

namespace data_pipeline {
namespace {

using S = ChromaSubsampling;

struct Kind {
  const char* name;
  JpegEncodeOptions options;
  // What the header must say and where the image must go.
  S subsampling;
  JpegColorSpace color_space;
  DecodeRoute route;
  const char* reason;
};

JpegEncodeOptions opts(S s, JpegColor color = JpegColor::kYCbCr, bool progressive = false,
                       bool arithmetic = false, int restart = 0) {
  JpegEncodeOptions o;
  o.subsampling = s;
  o.color = color;
  o.progressive = progressive;
  o.arithmetic = arithmetic;
  o.restart_interval = restart;
  return o;
}

std::vector<Kind> kinds() {
  using C = JpegColorSpace;
  using R = DecodeRoute;
  const auto ycc = JpegColor::kYCbCr;
  return {
      {"baseline_444", opts(S::k444), S::k444, C::kYCbCr, R::kHardware, ""},
      {"baseline_422", opts(S::k422), S::k422, C::kYCbCr, R::kHardware, ""},
      {"baseline_420", opts(S::k420), S::k420, C::kYCbCr, R::kHardware, ""},
      {"baseline_440", opts(S::k440), S::k440, C::kYCbCr, R::kHardware, ""},
      {"baseline_411", opts(S::k411), S::k411, C::kYCbCr, R::kCpu, "4:1:1 subsampling"},
      {"baseline_410", opts(S::k410), S::k410, C::kYCbCr, R::kCpu, "4:1:0 subsampling"},
      {"grayscale", opts(S::k420, JpegColor::kGrayscale), S::kGray, C::kGray, R::kHardware, ""},
      {"restart_markers", opts(S::k420, ycc, false, false, 1), S::k420, C::kYCbCr, R::kHardware,
       ""},
      {"progressive", opts(S::k420, ycc, true), S::k420, C::kYCbCr, R::kCpu, "progressive"},
      {"progressive_gray", opts(S::k420, JpegColor::kGrayscale, true), S::kGray, C::kGray, R::kCpu,
       "progressive"},
      {"arithmetic", opts(S::k420, ycc, false, true), S::k420, C::kYCbCr, R::kCpu,
       "arithmetic coding"},
      {"cmyk", opts(S::k444, JpegColor::kCmykAdobe), S::k444, C::kCmyk, R::kCpu, "CMYK"},
      {"ycck", opts(S::k420, JpegColor::kYcckAdobe), S::k420, C::kYcck, R::kCpu, "YCCK"},
  };
}

std::vector<std::uint8_t> encode(const Kind& k, int width, int height) {
  const int channels = k.options.color == JpegColor::kGrayscale ? 1
                       : k.options.color == JpegColor::kYCbCr   ? 3
                                                                : 4;
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(width * height * channels));
  for (std::size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<std::uint8_t>(i * 7 % 251);
  return encode_jpeg(pixels.data(), width, height, channels,
                     static_cast<std::size_t>(width * channels), k.options);
}

class DecodeRouteKindTest : public ::testing::TestWithParam<Kind> {};

TEST_P(DecodeRouteKindTest, TheHeaderSaysWhatTheStreamIsAndRoutesIt) {
  const Kind& k = GetParam();
  const auto jpeg = encode(k, 333, 217);
  JpegDecoder decoder;
  const JpegHeader h = decoder.read_header(jpeg.data(), jpeg.size(), k.name);
  EXPECT_EQ(h.width, 333);
  EXPECT_EQ(h.height, 217);
  EXPECT_EQ(h.subsampling, k.subsampling);
  EXPECT_EQ(h.color_space, k.color_space);
  EXPECT_EQ(h.components, k.color_space == JpegColorSpace::kGray    ? 1
                          : k.color_space == JpegColorSpace::kYCbCr ? 3
                                                                    : 4);
  EXPECT_EQ(h.progressive, k.options.progressive);
  EXPECT_EQ(h.arithmetic, k.options.arithmetic);
  EXPECT_EQ(h.precision, 8);
  EXPECT_EQ(h.restart_interval > 0, k.options.restart_interval > 0);
  const RouteDecision d = hardware_route(h);
  EXPECT_EQ(d.route, k.route);
  EXPECT_STREQ(d.reason, k.reason);
  // The same size the decoder finds (the crop windows of both paths are drawn from it).
  DecodeInfo info;
  decoder.decode_full(jpeg.data(), jpeg.size(), k.name, &info);
  EXPECT_EQ(info.image_width, h.width);
  EXPECT_EQ(info.image_height, h.height);
}

INSTANTIATE_TEST_SUITE_P(EveryKind, DecodeRouteKindTest, ::testing::ValuesIn(kinds()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(DecodeRouteTest, WhatTheDecoderRejectsTheHeaderRejectsToo) {
  const auto jpeg = encode(kinds()[2], 320, 240);
  JpegDecoder decoder;
  auto expect_error = [&](std::vector<std::uint8_t> bytes, const std::string& fragment) {
    try {
      decoder.read_header(bytes.data(), bytes.size(), "x.jpg");
      FAIL() << "expected a DataError with " << fragment;
    } catch (const DataError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("x.jpg: ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_error({jpeg.begin(), jpeg.begin() + static_cast<long>(jpeg.size() / 2)}, "truncated");
  expect_error({jpeg.begin(), jpeg.begin() + 40}, "JPEG header");
  expect_error({}, "empty file");
  const std::vector<std::uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13};
  expect_error(png, "not a JPEG stream");  // the CPU path decodes such a file through OpenCV
  // The decoder is still usable.
  EXPECT_EQ(decoder.read_header(jpeg.data(), jpeg.size(), "y.jpg").width, 320);
}

TEST(DecodeRouteTest, TheTableCoversUnusualHeaders) {
  JpegHeader h;
  h.components = 3;
  h.color_space = JpegColorSpace::kYCbCr;
  h.subsampling = S::k420;
  EXPECT_EQ(hardware_route(h).route, DecodeRoute::kHardware);
  h.precision = 12;
  EXPECT_STREQ(hardware_route(h).reason, "more than 8 bits per sample");
  h.precision = 8;
  h.subsampling = S::kOther;
  EXPECT_STREQ(hardware_route(h).reason, "unusual subsampling");
  h.subsampling = S::k420;
  h.color_space = JpegColorSpace::kRgb;
  EXPECT_STREQ(hardware_route(h).reason, "RGB stored without colour transform");
  EXPECT_STREQ(common::to_string(DecodeRoute::kHardware), "hardware");
}

TEST(DecodeRouteTest, OnlyAStreamEndingWithItsEndOfImageMarkerGoesToTheEngines) {
  auto jpeg = encode(kinds()[2], 64, 48);
  EXPECT_TRUE(ends_with_eoi(jpeg.data(), jpeg.size()));
  auto padded = jpeg;
  padded.insert(padded.end(), 16, 0x00);  // zero padding after the marker is harmless
  EXPECT_TRUE(ends_with_eoi(padded.data(), padded.size()));
  auto cut = jpeg;
  cut.resize(cut.size() - 2);
  EXPECT_FALSE(ends_with_eoi(cut.data(), cut.size()));
  cut.resize(cut.size() / 2);
  EXPECT_FALSE(ends_with_eoi(cut.data(), cut.size()));
  auto trailing = jpeg;
  trailing.insert(trailing.end(), {'e', 'x', 't', 'r', 'a'});  // data appended after the image
  EXPECT_FALSE(ends_with_eoi(trailing.data(), trailing.size()));
  const std::uint8_t tiny[] = {0xFF, 0xD9};
  EXPECT_FALSE(ends_with_eoi(tiny, sizeof(tiny)));
  EXPECT_FALSE(ends_with_eoi(nullptr, 0));
}

}  // namespace
}  // namespace data_pipeline
