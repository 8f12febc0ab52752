// The evaluation pass of an --epochs run: the test split in order, resized and centre-cropped, once
// through the model in eval mode, with its own NVTX ranges.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data_pipeline/food101_index.h"
#include "lib/config/train_config.h"
#include "lib/input/input_source.h"
#include "lib/instrument/phase.h"
#include "lib/model/resnet50.h"
#include "lib/report/run_result.h"
#include "lib/step/eval_step.h"

namespace workload {

class Distributed;

/// The evaluation's input: `config` with the evaluation's split order (no shuffle), batch
/// (--eval-batch-size), every image once (the last batch short, the ranks' shards unpadded) and
/// torchvision's evaluation transform (Resize(S x 256 / 224) + CenterCrop(S), no flip).
TrainConfig eval_input_config(const TrainConfig& config);

/// The pass: eval { eval_step { batch_wait, h2d_submit, [normalize], forward }..., eval_reduce }
/// (lib/instrument/nvtx.h), the model in eval mode throughout and back in train mode after. Its
/// input source runs ahead between passes (its threads decode the next pass's first batches, then
/// wait): every pass reads the same batches.
/// Under torchrun each rank evaluates its shard, and eval_reduce sums the counts over the ranks.
/// Not thread-safe: the trainer's thread; cancel() from any.
class Evaluator {
 public:
  /// \throws as make_input_source (DataError naming the split's file).
  Evaluator(const TrainConfig& config, std::shared_ptr<const data_pipeline::Food101Index> index,
            ResNet50 model, torch::Device device, Distributed* dist,
            std::vector<std::string>& notices);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  /// One pass. `tracker` names the phase a failure happened in.
  /// \throws data_pipeline::Cancelled after cancel(); DataError; what the model throws.
  EvalRecord run(PhaseTracker* tracker);
  /// This rank's evaluation steps a pass.
  std::int64_t steps_per_pass() const { return steps_; }
  /// Makes a waiting or later run() throw Cancelled. Any thread.
  void cancel() { input_->cancel(); }
  /// Joins the source's threads (before the device's resources go). Idempotent.
  void stop() { input_->stop(); }

 private:
  // The images the loader replaced in the batch just submitted (--on-bad-image skip): their labels
  // set to -100 so that the step counts them nowhere, their paths into `result`.
  void leave_out_skipped(StepInputs& inputs, EvalRecord& result) const;

  ResNet50 model_;
  Distributed* dist_;
  std::unique_ptr<InputSource> input_;
  EvalStep step_;
  bool normalize_;
  std::int64_t steps_ = 0;
};

}  // namespace workload
