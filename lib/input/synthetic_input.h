// Synthetic batches as the step's input source: one random batch made once on the device and read
// by every step (--synthetic, the GPU-bound ceiling).
#pragma once

#include "data_pipeline/loader.h"
#include "lib/input/input_source.h"

namespace workload {

/// One batch of random images (standard normal float32, or uint8 0..255) and labels, drawn from
/// seed + 1 on the host, digested, and copied to the device once; next() waits for nothing and
/// submit() returns the same tensors every step (`persistent`). Thread-safety: InputSource's.
class SyntheticInput final : public InputSource {
 public:
  SyntheticInput(const data_pipeline::LoaderOptions& options, std::int64_t num_classes,
                 torch::Device device);

  void next() override {}
  const data_pipeline::BatchInfo& info() const override { return info_; }
  StepInputs submit() override { return inputs_; }

 private:
  /// The batch's digest and size; no position in an epoch.
  class Info : public data_pipeline::BatchInfo {
   public:
    Info() = default;
    Info(std::uint64_t digest, std::int64_t size) {
      digest_ = digest;
      position_.count = size;
    }
  };
  Info info_;
  StepInputs inputs_;
};

}  // namespace workload
