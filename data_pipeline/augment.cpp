// torchvision-equivalent RandomResizedCrop.get_params and RandomHorizontalFlip decisions.
#include "data_pipeline/augment.h"

#include <algorithm>
#include <cmath>

namespace data_pipeline {

AugmentParams sample_augment(CounterRng& rng, int width, int height,
                             const AugmentOptions& options) {
  AugmentParams out;
  if (options.crop == CropMode::kCenter) {
    const int shorter = std::min(width, height);
    const int side =
        std::clamp(static_cast<int>(std::nearbyint(shorter * options.center_fraction)), 1, shorter);
    // CenterCrop's int(round((size - crop) / 2.0)): Python's round, half to even.
    out.crop.x = static_cast<int>(std::nearbyint((width - side) / 2.0));
    out.crop.y = static_cast<int>(std::nearbyint((height - side) / 2.0));
    out.crop.width = side;
    out.crop.height = side;
    return out;
  }
  const double area = static_cast<double>(width) * static_cast<double>(height);
  const double log_ratio_min = std::log(options.ratio_min);
  const double log_ratio_max = std::log(options.ratio_max);
  bool found = false;
  for (int attempt = 0; attempt < options.attempts && !found; ++attempt) {
    const double target_area = area * rng.uniform(options.scale_min, options.scale_max);
    const double aspect = std::exp(rng.uniform(log_ratio_min, log_ratio_max));
    // Python's round() rounds half to even; std::nearbyint does the same in the default mode.
    const int w = static_cast<int>(std::nearbyint(std::sqrt(target_area * aspect)));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(target_area / aspect)));
    if (0 < w && w <= width && 0 < h && h <= height) {
      out.crop.y = static_cast<int>(rng.below(static_cast<std::uint64_t>(height - h) + 1));
      out.crop.x = static_cast<int>(rng.below(static_cast<std::uint64_t>(width - w) + 1));
      out.crop.width = w;
      out.crop.height = h;
      found = true;
    }
  }
  if (!found) {
    // Centre crop with the aspect ratio clamped into [ratio_min, ratio_max].
    const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
    int w = width;
    int h = height;
    if (in_ratio < options.ratio_min) {
      h = static_cast<int>(std::nearbyint(w / options.ratio_min));
    } else if (in_ratio > options.ratio_max) {
      w = static_cast<int>(std::nearbyint(h * options.ratio_max));
    }
    w = std::clamp(w, 1, width);
    h = std::clamp(h, 1, height);
    out.crop = {(width - w) / 2, (height - h) / 2, w, h};
  }
  out.flip = rng.bernoulli(options.flip_probability);
  return out;
}

}  // namespace data_pipeline
