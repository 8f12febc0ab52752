// The evaluation pass of an --epochs run (lib/run/evaluator.h).
#include "lib/run/evaluator.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "lib/distributed/distributed.h"
#include "lib/instrument/nvtx.h"

namespace workload {

namespace dp = data_pipeline;

TrainConfig eval_input_config(const TrainConfig& config) {
  TrainConfig c = config;
  c.split = config.eval_split;
  c.loader.batch_size = config.eval_batch_size.value_or(config.loader.batch_size);
  c.loader.shuffle = false;
  c.loader.drop_last = false;
  c.loader.pad_shards = false;
  c.loader.transform.augment.crop = dp::CropMode::kCenter;
  return c;
}

Evaluator::Evaluator(const TrainConfig& config, std::shared_ptr<const dp::Food101Index> index,
                     ResNet50 model, torch::Device device, Distributed* dist,
                     std::vector<std::string>& notices)
    : model_(std::move(model)),
      dist_(dist),
      step_(model_, config, device),  // model_ is declared (made) first
      normalize_(config.loader.transform.dtype == dp::HostDType::kUInt8) {
  TrainConfig eval = eval_input_config(config);
  // No batch larger than this rank's share of the split: the ring is sized for what a pass reads.
  const int world = dist ? dist->world_size() : 1;
  eval.loader.batch_size =
      std::min<std::int64_t>(eval.loader.batch_size, dp::shard_size(index->size(), world));
  const std::int64_t classes = index->num_classes();
  input_ = make_input_source({eval, std::move(index), device, classes,
                              dist ? dist->world_size() : 1, dist ? dist->rank() : 0, notices});
  const std::optional<HostRingFacts> ring = input_->host_ring();
  if (!ring) throw std::logic_error("Evaluator: the evaluation's source has no loader");
  steps_ = ring->batches_per_epoch;
}

Evaluator::~Evaluator() { stop(); }

void Evaluator::leave_out_skipped(StepInputs& inputs, EvalRecord& result) const {
  const dp::BatchInfo& info = input_->info();
  if (info.skipped().empty()) return;
  std::vector<std::int64_t> positions;
  for (const dp::SkippedImage& s : info.skipped()) {
    result.skipped.push_back(s.path);
    const auto& indices = info.indices();
    for (std::size_t i = 0; i < indices.size(); ++i) {
      if (indices[i] == s.dataset_index) positions.push_back(static_cast<std::int64_t>(i));
    }
  }
  // cross_entropy's ignore_index: EvalStep counts no image, hit or loss for it.
  inputs.labels = inputs.labels.clone();
  inputs.labels.index_fill_(0, torch::tensor(positions).to(inputs.labels.device()), -100);
}

EvalRecord Evaluator::run(PhaseTracker* tracker) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  EvalRecord result;
  {
    Phase range(nvtx::kEval, tracker);
    struct TrainAfter {  // back in train mode however the pass ends
      ResNet50& model;
      ~TrainAfter() { model->train(); }
    } train_after{model_};
    model_->eval();
    step_.begin();
    for (std::int64_t i = 0; i < steps_; ++i) {
      Phase step(nvtx::kEvalStep, tracker);
      {
        Phase wait(nvtx::kBatchWait, tracker);
        input_->next();
      }
      StepInputs inputs;
      {
        Phase submit(nvtx::kH2dSubmit, tracker);
        inputs = input_->submit();
      }
      leave_out_skipped(inputs, result);
      if (normalize_) {
        Phase norm(nvtx::kNormalize, tracker);
        step_.normalize(inputs);
      }
      {
        Phase forward(nvtx::kForward, tracker);
        step_.forward(inputs);
      }
      input_->release_after_step();
      ++result.steps;
    }
    Phase reduce(nvtx::kEvalReduce, tracker);
    if (dist_) dist_->all_reduce_sum(step_.totals());
    const EvalCounts counts = EvalStep::read(step_.totals());
    result.images = counts.images;
    if (counts.images > 0) {
      const auto n = static_cast<double>(counts.images);
      result.top1 = static_cast<double>(counts.top1) / n;
      result.top5 = static_cast<double>(counts.top5) / n;
      result.loss = counts.loss_sum / n;
    }
  }
  result.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return result;
}

}  // namespace workload
