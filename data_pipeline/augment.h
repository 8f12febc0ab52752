// torchvision-equivalent RandomResizedCrop + RandomHorizontalFlip parameters and Normalize
// constants.
#pragma once

#include <array>
#include <cstdint>

#include "data_pipeline/counter_rng.h"

namespace data_pipeline {

/// A crop rectangle in source-image pixels (top-left corner and size), as torchvision's
/// `RandomResizedCrop.get_params` returns it (i, j, h, w) = (y, x, height, width).
struct CropRect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
  friend bool operator==(const CropRect& a, const CropRect& b) {
    return a.x == b.x && a.y == b.y && a.width == b.width && a.height == b.height;
  }
};

/// The random decisions for one sample.
struct AugmentParams {
  CropRect crop;
  bool flip = false;
};

/// How a sample's crop is chosen.
enum class CropMode {
  kRandomResized,  ///< Training: RandomResizedCrop + RandomHorizontalFlip (torchvision's).
  kCenter,         ///< Evaluation: Resize(S / center_fraction) + CenterCrop(S), no flip, no draws.
};

/// RandomResizedCrop(scale, ratio) + RandomHorizontalFlip(p) settings, or the evaluation's centre
/// crop. Defaults are torchvision's.
struct AugmentOptions {
  CropMode crop = CropMode::kRandomResized;
  /// kCenter: the crop's side over the image's shorter side; torchvision's evaluation transform,
  /// Resize(256) + CenterCrop(224), keeps 224 / 256 of it. In (0, 1].
  double center_fraction = 224.0 / 256.0;
  double scale_min = 0.08;
  double scale_max = 1.0;
  double ratio_min = 3.0 / 4.0;
  double ratio_max = 4.0 / 3.0;
  double flip_probability = 0.5;
  int attempts = 10;
};

/// Draws the crop exactly as torchvision's `RandomResizedCrop.get_params` does: up to `attempts`
/// tries of an area fraction uniform in [scale_min, scale_max] and a log-uniform aspect ratio,
/// accepting the first that fits, then the centre-crop fallback clamped to [ratio_min, ratio_max];
/// then the flip. Consumes draws from `rng` in a fixed order, so the result is a pure function of
/// the generator's key and the image size.
/// With CropMode::kCenter: the centred square of side round(center_fraction x the shorter side)
/// (at least 1), which resized to S is torchvision's Resize(S / center_fraction) + CenterCrop(S)
/// up to the resampling; its offsets round (size - side) / 2 as CenterCrop does; no flip, no draw
/// from `rng`. Pure; thread-safe.
AugmentParams sample_augment(CounterRng& rng, int image_width, int image_height,
                             const AugmentOptions& options = {});

/// ImageNet normalisation used by the article's transform: (x / 255 - mean) / std per RGB channel.
inline constexpr std::array<float, 3> kImageNetMean = {0.485f, 0.456f, 0.406f};
inline constexpr std::array<float, 3> kImageNetStd = {0.229f, 0.224f, 0.225f};

}  // namespace data_pipeline
