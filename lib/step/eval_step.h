// The evaluation's step: forward without autograd, BatchNorm on its running statistics, and the
// batch's loss and top-1 / top-5 hits added up on the device.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>

#include "lib/config/train_config.h"
#include "lib/input/input_source.h"
#include "lib/model/resnet50.h"
#include "lib/step/device_normalize.h"

namespace workload {

/// An evaluation's totals: images seen (labels >= 0: a negative label leaves its image out), top-1
/// and top-5 hits, and the sum of their cross-entropy losses (without label smoothing), summed over
/// a pass (and over the ranks, by the caller).
struct EvalCounts {
  std::int64_t images = 0;
  std::int64_t top1 = 0;
  std::int64_t top5 = 0;
  double loss_sum = 0;
};

/// Queues an evaluation's batches and keeps their counts on the device, read once at the end of a
/// pass: nothing inside a pass waits for the device. The model runs in its training precision
/// (bf16 or fp16 autocast with --precision) and memory format; the caller puts it in eval mode.
/// With fewer than 5 classes top-5 counts the top min(5, classes).
///
/// Not thread-safe; the training thread.
class EvalStep {
 public:
  EvalStep(ResNet50 model, const TrainConfig& config, torch::Device device);

  /// Zeroes the device's counts: the start of a pass.
  void begin();
  /// Inside `normalize`: uint8 batches to normalised float32 (the training step's normalisation).
  void normalize(StepInputs& inputs) const { inputs.images = normalize_(inputs.images); }
  /// Inside `forward`: the logits of `inputs`, and their loss and hits added to the counts.
  void forward(const StepInputs& inputs);
  /// The counts as a float64 tensor {images, top1, top5, loss_sum} on the device (for a sum over
  /// ranks in place).
  torch::Tensor& totals() { return totals_; }
  /// `totals` read on the host (waits for the device).
  static EvalCounts read(const torch::Tensor& totals);

 private:
  ResNet50 model_;
  std::optional<at::ScalarType> autocast_;  // the dtype autocast casts to; none: fp32
  DeviceNormalize normalize_;
  torch::Tensor totals_;
};

}  // namespace workload
