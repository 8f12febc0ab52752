// The normalize phase of a uint8 batch: (x / 255 - mean) / std on the device, shared by the
// training step and the evaluation's.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "data_pipeline/augment.h"

namespace workload {

/// ImageNet normalisation as x * scale + bias per channel (1 x 3 x 1 x 1 on `device`), the
/// constants of data_pipeline/augment.h. Immutable after construction; the tensors are read by
/// every call, so one thread queues them at a time.
class DeviceNormalize {
 public:
  explicit DeviceNormalize(torch::Device device) {
    std::vector<float> scale(3), bias(3);
    for (int c = 0; c < 3; ++c) {
      scale[c] = 1.0f / (255.0f * data_pipeline::kImageNetStd[c]);
      bias[c] = -data_pipeline::kImageNetMean[c] / data_pipeline::kImageNetStd[c];
    }
    scale_ = torch::tensor(scale).view({1, 3, 1, 1}).to(device);
    bias_ = torch::tensor(bias).view({1, 3, 1, 1}).to(device);
  }

  /// `images` (uint8) as normalised float32; the memory format (NHWC strides) is kept.
  torch::Tensor operator()(const torch::Tensor& images) const {
    return images.to(torch::kFloat32).mul_(scale_).add_(bias_);
  }

 private:
  torch::Tensor scale_, bias_;
};

}  // namespace workload
