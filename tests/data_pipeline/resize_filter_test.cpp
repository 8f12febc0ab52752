// Tests for the resize filter shared by the CPU tests and the GPU resize kernel: its weights
// against a reference written from Pillow's precompute_coeffs in double precision, and the
// properties that make it torchvision's (normalised, exact on constant and linear signals away from
// the edges, plain bilinear when enlarging, the identity at scale 1).
#include "data_pipeline/resize_filter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace data_pipeline {
namespace {

// Pillow's coefficients for output pixel i (bilinear filter, box [0, in)), by source pixel.
std::map<int, double> reference(int i, int in, int out) {
  const double scale = static_cast<double>(in) / out;
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;
  const double center = (i + 0.5) * scale;
  int xmin = static_cast<int>(center - support + 0.5);
  if (xmin < 0) xmin = 0;
  int xmax = static_cast<int>(center + support + 0.5);
  if (xmax > in) xmax = in;
  std::map<int, double> w;
  double total = 0;
  for (int x = xmin; x < xmax; ++x) {
    const double d = std::abs((x - center + 0.5) / filterscale);
    w[x] = d < 1.0 ? 1.0 - d : 0.0;
    total += w[x];
  }
  for (auto& [x, v] : w) v /= total;
  return w;
}

std::map<int, double> ours(int i, int in, int out) {
  const FilterTaps t = filter_taps(i, in, out);
  std::map<int, double> w;
  for (int j = t.first; j < t.first + t.count; ++j) w[j] = filter_weight(t, j);
  return w;
}

TEST(ResizeFilterTest, WeightsArePillowsForShrinkingAndEnlarging) {
  const std::vector<std::pair<int, int>> sizes = {{512, 224}, {4000, 224}, {225, 224}, {224, 224},
                                                  {100, 224}, {37, 224},   {3000, 7},  {1, 224},
                                                  {224, 1},   {333, 112}};
  for (const auto& [in, out] : sizes) {
    for (int i = 0; i < out; ++i) {
      const auto want = reference(i, in, out);
      const auto got = ours(i, in, out);
      // Taps the two roundings disagree on carry a weight of (almost) zero.
      std::map<int, double> all = want;
      for (const auto& [x, v] : got) all.emplace(x, 0.0);
      for (const auto& [x, unused] : all) {
        const double a = want.count(x) ? want.at(x) : 0.0;
        const double b = got.count(x) ? got.at(x) : 0.0;
        // Pillow's double weights, rounded to float.
        ASSERT_NEAR(a, b, 1e-6) << in << " -> " << out << ", output " << i << ", source " << x;
      }
    }
  }
}

TEST(ResizeFilterTest, WeightsAreNormalisedAndStayInside) {
  for (const auto& [in, out] : std::vector<std::pair<int, int>>{{512, 224}, {90, 224}, {5, 3}}) {
    for (int i = 0; i < out; ++i) {
      const FilterTaps t = filter_taps(i, in, out);
      ASSERT_GE(t.first, 0);
      ASSERT_LE(t.first + t.count, in);
      ASSERT_GT(t.count, 0);
      double sum = 0;
      for (int j = t.first; j < t.first + t.count; ++j) sum += filter_weight(t, j);
      EXPECT_NEAR(sum, 1.0, 1e-6) << in << " -> " << out << ", output " << i;
    }
  }
}

TEST(ResizeFilterTest, ScaleOneIsTheIdentityAndEnlargingIsPlainBilinear) {
  for (int i = 0; i < 50; ++i) {
    const auto w = ours(i, 50, 50);
    ASSERT_EQ(w.size(), w.count(i) ? w.size() : 0u);
    EXPECT_NEAR(w.at(i), 1.0, 1e-7);
    for (const auto& [x, v] : w) {
      if (x != i) {
        EXPECT_NEAR(v, 0.0, 1e-7);
      }
    }
  }
  // 2x enlargement, away from the edges: pixel i samples (i + 0.5) / 2 - 0.5 between two sources.
  for (int i = 2; i < 98; ++i) {
    const double x = (i + 0.5) / 2.0 - 0.5;
    const int left = static_cast<int>(std::floor(x));
    const double frac = x - left;
    const auto w = ours(i, 50, 100);
    EXPECT_NEAR(w.count(left) ? w.at(left) : 0.0, 1.0 - frac, 1e-6) << i;
    EXPECT_NEAR(w.count(left + 1) ? w.at(left + 1) : 0.0, frac, 1e-6) << i;
  }
}

TEST(ResizeFilterTest, ConstantSignalsStayAndLinearOnesAtWholeRatios) {
  // Constant: always (the weights are normalised). Linear: whenever the sampled triangle is
  // symmetric about the output centre, as at whole shrink ratios and when enlarging (not in
  // general: Pillow samples the stretched triangle at pixel centres).
  for (const auto& [in, out] :
       std::vector<std::pair<int, int>>{{448, 224}, {896, 224}, {112, 224}, {1000, 224}}) {
    const bool linear = in % out == 0 || in < out;
    const double scale = static_cast<double>(in) / out;
    for (int i = 3; i < out - 3; ++i) {
      const FilterTaps t = filter_taps(i, in, out);
      double constant = 0, ramp = 0;
      for (int j = t.first; j < t.first + t.count; ++j) {
        constant += filter_weight(t, j) * 5.0;
        ramp += filter_weight(t, j) * (3.0 * j + 7.0);
      }
      EXPECT_NEAR(constant, 5.0, 1e-5) << in << " -> " << out << ", " << i;
      const double centre = (i + 0.5) * scale - 0.5;  // in pixel-index coordinates
      if (linear) {
        EXPECT_NEAR(ramp, 3.0 * centre + 7.0, 1e-3) << in << " -> " << out << ", " << i;
      }
    }
  }
}

// A patterned image with every kind of edge, as the Pillow fixtures below were made:
// (x * 37 + y * 11 + c * 101 + ((x * y) ^ (c * 53))) mod 256.
std::vector<unsigned char> pattern(int width, int height) {
  std::vector<unsigned char> p(static_cast<std::size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        p[(static_cast<std::size_t>(y) * width + x) * 3 + c] =
            static_cast<unsigned char>((x * 37 + y * 11 + c * 101 + ((x * y) ^ (c * 53))) % 256);
      }
    }
  }
  return p;
}

std::uint64_t fnv1a(const std::vector<unsigned char>& bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char b : bytes) {
    h ^= b;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// Expected digests from Pillow 9.4 itself:
//   Image.fromarray(pattern(w, h)).resize((s, s), Image.BILINEAR), FNV-1a of the bytes.
TEST(ResizeFilterTest, TheReferenceResizeIsPillowsByteForByte) {
  struct Case {
    int width, height, size;
    std::uint64_t pillow_fnv;
    unsigned char first[3], last[3];
  };
  const Case cases[] = {
      {23, 17, 7, 0x4ef27b94709c38b0ULL, {66, 167, 116}, {140, 106, 176}},
      {23, 17, 31, 0x6904e228b00be604ULL, {0, 154, 52}, {62, 152, 178}},
      {400, 300, 224, 0xe43f5265528ea4f7ULL, {24, 178, 76}, {135, 80, 165}},
      {97, 500, 224, 0x4912ea813d752f72ULL, {9, 163, 61}, {75, 193, 121}},
      {224, 224, 224, 0xb9b1bde060e83265ULL, {0, 154, 52}, {17, 169, 197}},
      {1000, 37, 64, 0xd99c1181c25bb0e0ULL, {108, 124, 127}, {137, 82, 179}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(std::to_string(k.width) + "x" + std::to_string(k.height) + " -> " +
                 std::to_string(k.size));
    const auto src = pattern(k.width, k.height);
    std::vector<unsigned char> out(static_cast<std::size_t>(k.size) * k.size * 3);
    std::vector<unsigned char> rows;
    resize_reference(src.data(), k.width, k.height, static_cast<long>(k.width) * 3, out.data(),
                     k.size, rows);
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(out[c], k.first[c]);
      EXPECT_EQ(out[out.size() - 3 + c], k.last[c]);
    }
    EXPECT_EQ(fnv1a(out), k.pillow_fnv);
  }
}

TEST(ResizeFilterTest, MaxFilterTapsBoundsEveryOutputPixel) {
  for (int in : {1, 2, 3, 7, 100, 223, 224, 225, 447, 448, 449, 500, 1000, 4000, 8191}) {
    for (int out : {1, 7, 64, 224, 299}) {
      const int bound = max_filter_taps(in, out);
      int most = 0;
      for (int i = 0; i < out; ++i) most = std::max(most, filter_taps(i, in, out).count);
      EXPECT_LE(most, bound) << in << " -> " << out;
      EXPECT_LE(bound, most + 4) << in << " -> " << out << ": a loose bound wastes table space";
    }
  }
}

TEST(ResizeFilterTest, FixedPointWeightsSumToOneInPillowsUnits) {
  for (const auto& [in, out] :
       std::vector<std::pair<int, int>>{{512, 224}, {4000, 224}, {100, 224}}) {
    for (int i = 0; i < out; i += 7) {
      const FilterTaps t = filter_taps(i, in, out);
      int sum = 0;
      for (int j = t.first; j < t.first + t.count; ++j) sum += filter_weight_fixed(t, j);
      EXPECT_NEAR(sum, 1 << kResizeWeightBits, t.count) << in << "->" << out << " pixel " << i;
    }
  }
}

}  // namespace
}  // namespace data_pipeline
