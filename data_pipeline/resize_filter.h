// The resize filter of torchvision's RandomResizedCrop on PIL images: bilinear, antialiased when
// shrinking (PIL's triangle filter, its support widened by the shrink factor). Header-only and
// usable from CUDA (__host__ __device__), so the GPU decode stage's resize kernel and the CPU tests
// run the same arithmetic.
#pragma once

#if defined(__CUDACC__)
#define WORKLOAD_HOST_DEVICE __host__ __device__
#else
#define WORKLOAD_HOST_DEVICE
#endif

#include <cstddef>

namespace data_pipeline {

/// The source pixels one output pixel reads along one axis, and the filter's geometry.
///
/// Resizing `in_size` source pixels (a crop, clipped to itself as torchvision crops before it
/// resizes) to `out_size`: output pixel i is centred at source coordinate (i + 0.5) * scale, with
/// scale = in_size / out_size; the triangle filter 1 - |d| is stretched by
/// stretch = max(scale, 1) (antialiasing when shrinking, plain bilinear when enlarging), so the
/// taps are the source pixels j with centre j + 0.5 within `stretch` of it, clipped to
/// [0, in_size), weighted by 1 - |j + 0.5 - centre| / stretch and normalised to sum to 1. These are
/// PIL's ImagingResample coefficients (precompute_coeffs) for the bilinear filter.
struct FilterTaps {
  int first = 0;           ///< First source pixel.
  int count = 0;           ///< Source pixels read.
  double centre = 0;       ///< Output pixel's centre in source coordinates.
  double inv_stretch = 1;  ///< 1 / max(scale, 1).
  double norm = 1;         ///< 1 / (sum of the unnormalised weights).
  double total = 0;        ///< Sum of the unnormalised weights.
};

/// Taps of output pixel `i` (0 <= i < out_size; in_size, out_size >= 1). Positions are computed in
/// double, as Pillow does: in float, a source position near 4000 would be off by 2^-12 pixels.
WORKLOAD_HOST_DEVICE inline FilterTaps filter_taps(int i, int in_size, int out_size) {
  FilterTaps t;
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double stretch = scale > 1.0 ? scale : 1.0;
  t.inv_stretch = 1.0 / stretch;
  t.centre = (static_cast<double>(i) + 0.5) * scale;
  // Pillow: xmin = (int)(centre - support + 0.5), xmax = (int)(centre + support + 0.5), clipped.
  int first = static_cast<int>(t.centre - stretch + 0.5);
  int last = static_cast<int>(t.centre + stretch + 0.5);
  if (first < 0) first = 0;
  if (last > in_size) last = in_size;
  t.first = first;
  t.count = last > first ? last - first : 0;
  double total = 0;
  for (int j = first; j < last; ++j) {
    const double d = (static_cast<double>(j) + 0.5 - t.centre) * t.inv_stretch;
    const double w = d < 0 ? 1.0 + d : 1.0 - d;
    if (w > 0) total += w;
  }
  t.norm = total > 0 ? 1.0 / total : 0.0;
  t.total = total;
  return t;
}

/// An upper bound on FilterTaps::count for any output pixel of an `in_size` -> `out_size` resize:
/// the taps lie within `stretch` of the centre, so at most 2 * stretch + 2 whole pixels, plus one
/// for rounding, and never more than the source has.
WORKLOAD_HOST_DEVICE inline int max_filter_taps(int in_size, int out_size) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double stretch = scale > 1.0 ? scale : 1.0;
  const int bound = static_cast<int>(2.0 * stretch) + 3;
  return bound < in_size ? bound : in_size;
}

/// Normalised weight of source pixel `j` (t.first <= j < t.first + t.count) in `t`.
WORKLOAD_HOST_DEVICE inline float filter_weight(const FilterTaps& t, int j) {
  const double d = (static_cast<double>(j) + 0.5 - t.centre) * t.inv_stretch;
  const double w = d < 0 ? 1.0 + d : 1.0 - d;
  return w > 0 ? static_cast<float>(w * t.norm) : 0.0f;
}

/// Fractional bits of Pillow's 8-bit resampling weights (PRECISION_BITS = 32 - 8 - 2).
inline constexpr int kResizeWeightBits = 22;

/// Pillow's fixed-point weight of source pixel `j` for 8-bit images (normalize_coeffs_8bpc): the
/// normalised weight w / total, times 2^22, rounded half away from zero.
WORKLOAD_HOST_DEVICE inline int filter_weight_fixed(const FilterTaps& t, int j) {
  const double d = (static_cast<double>(j) + 0.5 - t.centre) * t.inv_stretch;
  double w = d < 0 ? 1.0 + d : 1.0 - d;
  if (w < 0) w = 0;
  const double k = t.total != 0 ? w / t.total : 0.0;
  const double scaled = k * static_cast<double>(1 << kResizeWeightBits);
  return static_cast<int>(scaled < 0 ? scaled - 0.5 : scaled + 0.5);
}

/// One output value of Pillow's 8-bit resampling pass: the fixed-point sum with its rounding
/// offset, shifted back and clipped to 0..255 (clip8).
WORKLOAD_HOST_DEVICE inline unsigned char clip8(int sum_with_offset) {
  const int v = sum_with_offset >> kResizeWeightBits;
  return static_cast<unsigned char>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

/// The rounding offset Pillow starts each 8-bit sum with (one half).
inline constexpr int kResizeRoundingOffset = 1 << (kResizeWeightBits - 1);

/// The CPU reference of the GPU stage's resize: an interleaved 8-bit RGB image `width` x `height`
/// (row stride `stride` bytes) resized to `out_size` x `out_size` as Pillow's
/// Image.resize(BILINEAR) does it: a horizontal pass into 8-bit rows, then a vertical pass, each
/// with the fixed-point weights above. `dst` holds out_size^2 x 3 bytes; `rows` is scratch.
/// Identical, byte for byte, to Pillow's result for the same source pixels.
template <typename Scratch>
void resize_reference(const unsigned char* src, int width, int height, long stride,
                      unsigned char* dst, int out_size, Scratch& rows) {
  rows.assign(static_cast<std::size_t>(height) * out_size * 3, 0);
  for (int x = 0; x < out_size; ++x) {
    const FilterTaps t = filter_taps(x, width, out_size);
    for (int y = 0; y < height; ++y) {
      int sum[3] = {kResizeRoundingOffset, kResizeRoundingOffset, kResizeRoundingOffset};
      for (int j = t.first; j < t.first + t.count; ++j) {
        const int w = filter_weight_fixed(t, j);
        const unsigned char* p = src + y * stride + j * 3;
        for (int c = 0; c < 3; ++c) sum[c] += p[c] * w;
      }
      for (int c = 0; c < 3; ++c)
        rows[(static_cast<std::size_t>(y) * out_size + x) * 3 + c] = clip8(sum[c]);
    }
  }
  for (int y = 0; y < out_size; ++y) {
    const FilterTaps t = filter_taps(y, height, out_size);
    for (int x = 0; x < out_size; ++x) {
      int sum[3] = {kResizeRoundingOffset, kResizeRoundingOffset, kResizeRoundingOffset};
      for (int j = t.first; j < t.first + t.count; ++j) {
        const int w = filter_weight_fixed(t, j);
        const auto* p = &rows[(static_cast<std::size_t>(j) * out_size + x) * 3];
        for (int c = 0; c < 3; ++c) sum[c] += p[c] * w;
      }
      for (int c = 0; c < 3; ++c)
        dst[(static_cast<std::size_t>(y) * out_size + x) * 3 + c] = clip8(sum[c]);
    }
  }
}

}  // namespace data_pipeline
