// What an --epochs run's checkpoint holds, beside the file it lives in (lib/run/checkpoint.h): the
// run's fingerprint, its position, the epochs' records, the model's parameters and buffers and the
// optimizer's momentum; and a run put back from one. Free functions of their arguments alone.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data_pipeline/food101_index.h"
#include "lib/config/train_config.h"
#include "lib/model/foreach_sgd.h"
#include "lib/model/loss_scaler.h"
#include "lib/model/lr_schedule.h"
#include "lib/report/run_result.h"
#include "lib/run/checkpoint.h"

namespace workload {

/// What a checkpoint must share with the run resuming from it: the model (ResNet-50, `classes`),
/// the data (the split's size; with --checkpoint-dir its digest too: paths, labels and sizes, so
/// that another dataset of as many images does not resume), precision, memory format, ranks,
/// batch, image size, seed, and the whole schedule (`plan`: steps, kind, peak, warm-up; momentum,
/// weight decay, label smoothing). `split` may be null (synthetic data).
nlohmann::ordered_json run_fingerprint(const TrainConfig& config, const LrPlan& plan,
                                       std::int64_t classes,
                                       const data_pipeline::Food101Index* split, int world_size);

/// The checkpoint after `epochs_done` epochs, `elapsed_s` into the run: `fingerprint`, the
/// optimizer's step count, the records of every epoch so far, and the model's parameters
/// ("param/NAME"), buffers ("buffer/NAME") and the momentum of each parameter that has one
/// ("momentum/NAME"), and with `scaler` (fp16) the loss scaling's state ("loss_scaler": scale,
/// growth tracker, skipped steps). The tensors are the model's and the optimizer's own, not
/// copies: write the checkpoint before the next step.
Checkpoint make_checkpoint(const nlohmann::ordered_json& fingerprint, std::int64_t epochs_done,
                           const std::vector<EpochRecord>& epochs, double elapsed_s,
                           const torch::nn::Module& model, const ForeachSgd::State& optimizer,
                           const LossScaler::State* scaler = nullptr);

/// Copies `checkpoint`'s parameters and buffers into `model`'s own tensors (their layout, e.g.
/// channels_last, and their identity stay). \throws CheckpointError naming `path` and a tensor
/// that is missing or of another shape or type.
void restore_model(const Checkpoint& checkpoint, const std::string& path, torch::nn::Module& model);

/// Puts `optimizer` back where `checkpoint` left it: each parameter's momentum (absent: none yet)
/// and the step count, so that the schedule continues at its next step.
/// \throws CheckpointError naming `path` and what does not match `model`'s parameters.
void restore_optimizer(const Checkpoint& checkpoint, const std::string& path,
                       const torch::nn::Module& model, ForeachSgd& optimizer);

/// Puts `scaler` back where `checkpoint` left it (its scale, growth tracker and skipped steps).
/// \throws CheckpointError naming `path` when the checkpoint has no loss scaling state, or one
/// that is not a finite positive scale and counts of zero or more.
void restore_scaler(const Checkpoint& checkpoint, const std::string& path, LossScaler& scaler);

/// The records of the epochs `checkpoint`'s run finished, each marked `resumed`.
std::vector<EpochRecord> resumed_epochs(const Checkpoint& checkpoint);

}  // namespace workload
