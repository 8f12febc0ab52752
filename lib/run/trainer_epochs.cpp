// The Trainer's --epochs run: epochs of steps, an evaluation and a checkpoint at their ends, and a
// capture window anywhere (lib/run/trainer.h).
#include <cmath>
#include <optional>
#include <string>

#include "data_pipeline/data_error.h"
#include "lib/core/elapsed.h"
#include "lib/distributed/distributed.h"
#include "lib/instrument/nvtx.h"
#include "lib/run/capture_window.h"
#include "lib/run/checkpoint_state.h"
#include "lib/run/error_context.h"
#include "lib/run/trainer.h"

namespace workload {

namespace dp = data_pipeline;

namespace {

// The one rule for the best evaluation and the target, for the epochs of this session and those a
// resumed run read from its checkpoint alike: the best top-1 (the first epoch to reach it) and the
// run's time then; the target reached by an evaluation at or above it in a run whose every loss
// was finite.
void note_best(RunResult& result, const EpochRecord& e, const std::optional<double>& target) {
  if (!e.eval) return;
  if (!result.best_top1 || e.eval->top1 > *result.best_top1) {
    result.best_top1 = e.eval->top1;
    result.best_top1_epoch = e.epoch;
    result.time_to_best_top1_s = e.elapsed_s;
  }
  if (target && e.eval->top1 >= *target && result.nonfinite_loss.empty()) {
    result.target_reached = true;
  }
}

// A loss that was not finite among the epochs read from a checkpoint (a run with
// --allow-nonfinite-loss), named as the run that wrote them met it: a run resumed from there
// reaches no target either, as the whole run would not have.
void note_resumed_nonfinite(RunResult& result, const EpochRecord& e) {
  if (!result.nonfinite_loss.empty()) return;
  const std::string epoch = std::to_string(e.epoch);
  if (!std::isfinite(e.train_loss)) {
    result.nonfinite_loss =
        "epoch " + epoch + " (read from the checkpoint): loss " + std::to_string(e.train_loss);
  } else if (e.eval && !std::isfinite(e.eval->loss)) {
    result.nonfinite_loss = "the evaluation after epoch " + epoch +
                            " (read from the checkpoint): loss " + std::to_string(e.eval->loss);
  }
}

}  // namespace

CheckpointRecord Trainer::write_checkpoint(std::int64_t epochs_done,
                                           const std::vector<EpochRecord>& done, double elapsed_s) {
  const auto t = SteadyClock::now();
  Phase range(nvtx::kCheckpoint, &tracker_);
  CheckpointRecord out;
  out.path = checkpoints_->file_for(epochs_done);
  if (!dist_ || dist_->rank() == 0) {
    const LossScaler::State scaler_state = scaler_ ? scaler_->state() : LossScaler::State{};
    out.path =
        checkpoints_->write(epochs_done,
                            make_checkpoint(fingerprint_, epochs_done, done, elapsed_s, *model_,
                                            optimizer_->state(), scaler_ ? &scaler_state : nullptr),
                            &out.bytes);
  }
  out.ms = ms_since(t);
  return out;
}

bool Trainer::note_nonfinite(RunResult& result, const torch::Tensor& losses,
                             std::int64_t first_step, std::int64_t epoch) const {
  if (!result.nonfinite_loss.empty()) return false;  // the first one is named already
  const torch::Tensor bad = torch::nonzero(torch::isfinite(losses).logical_not()).cpu();
  const std::int64_t k = bad.numel() > 0 ? bad[0][0].item<std::int64_t>() : 0;
  std::string where = "step " + std::to_string(first_step + k);
  if (epoch >= 0) where += " (epoch " + std::to_string(epoch) + ")";
  result.nonfinite_loss = where + ": loss " + std::to_string(losses[k].item<double>());
  result.nonfinite_stopped = !config_.allow_nonfinite_loss;
  return result.nonfinite_stopped;
}

void Trainer::note_loss_scaling(EpochRecord& rec, const torch::Tensor& found,
                                std::int64_t first_step, const RunResult& result) const {
  if (!result.epochs.empty()) rec.skipped_at = result.epochs.back().skipped_at;
  for (const std::int64_t s : skipped_steps_of(found, first_step)) rec.skipped_at.push_back(s);
  const LossScaler::State scaling = scaler_->state();
  rec.loss_scale = scaling.scale;
  rec.skipped_steps = scaling.skipped_steps;
}

bool Trainer::note_nonfinite_eval(RunResult& result, const EpochRecord& rec) const {
  if (!rec.eval || std::isfinite(rec.eval->loss) || !result.nonfinite_loss.empty()) return false;
  result.nonfinite_loss = "the evaluation after epoch " + std::to_string(rec.epoch) + ": loss " +
                          std::to_string(rec.eval->loss);
  if (config_.allow_nonfinite_loss) return false;
  result.nonfinite_stopped = true;
  return true;
}

double Trainer::take_resumed_epochs(RunResult& result) {
  if (!resume_) return 0;
  const double elapsed_before = resume_->meta.value("elapsed_s", 0.0);
  result.resumed_from = resume_path_;
  try {
    result.epochs = resumed_epochs(*resume_);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError("checkpoint " + resume_path_ + ": its epochs' records: " + e.what());
  }
  resume_.reset();  // its tensors are in place
  for (const EpochRecord& e : result.epochs) {
    note_resumed_nonfinite(result, e);
    note_best(result, e, config_.target_top1);
  }
  return elapsed_before;
}

std::int64_t Trainer::train_epoch(std::int64_t& step, CaptureWindow& window, RunResult& result,
                                  const Progress& progress, const torch::Tensor& losses,
                                  const torch::Tensor& found) {
  // The capture window: steps [capture_at, capture_at + --steps) and what lies between them.
  const std::int64_t window_first = config_.capture_at.value_or(-1);
  const std::int64_t window_end = window_first + config_.steps;
  std::int64_t done = 0;
  for (; done < steps_per_epoch_; ++done, ++step) {
    if (stop_->at_boundary()) break;
    if (step == window_first) {
      device_synchronize();  // the window starts with nothing queued before it
      window.open();
    }
    const bool in_window = window.is_open();
    std::vector<StepRecord>& into = window_first < 0 || in_window ? result.steps
                                    : window.closed()             ? result.steps_after_capture
                                                                  : result.warmup_steps;
    const int index =
        in_window ? static_cast<int>(step - window_first) : static_cast<int>(into.size());
    run_step_ = step;
    const bool ran = guarded_step(index, !in_window, into, progress);
    run_step_.reset();
    if (!ran) break;
    losses.select(0, done).copy_(executor_->loss().detach());
    if (found.defined()) found.narrow(0, done, 1).copy_(scaler_->found_inf());
    if (in_window && step + 1 == window_end) window.close();
  }
  return done;
}

bool Trainer::evaluate_epoch(EpochRecord& rec) {
  const bool last = rec.epoch + 1 == config_.epochs;
  if (!evaluator_ || ((rec.epoch + 1) % config_.eval_every != 0 && !last)) return false;
  try {
    rec.eval = evaluator_->run(&tracker_);
  } catch (const dp::Cancelled&) {
    // A stop during the evaluation: the epoch's training is whole, so it is kept (recorded and
    // saved) without the evaluation, and the run stops after the checkpoint.
    rec.eval_cut = true;
    return true;
  } catch (...) {
    rethrow_in_context(tracker_.current, "the evaluation after epoch " + std::to_string(rec.epoch),
                       DataErrorContext::kPrefixWhere);
  }
  return false;
}

void Trainer::run_epochs(RunResult& result, const Progress& progress) {
  const std::int64_t spe = steps_per_epoch_;
  const std::int64_t batch = config_.loader.batch_size;
  const int world = dist_ ? dist_->world_size() : 1;
  const double elapsed_before = take_resumed_epochs(result);
  if (result.target_reached) return;  // the checkpoint's run had already reached it
  // The loader's epoch e is the run's epoch e: a resumed run reads its next epoch's batches.
  if (first_epoch_ > 0) input_->reset_to(first_epoch_);

  CaptureWindow window(result, device_.is_cuda(), outputs_.torch_trace, batch);
  const auto t_run = SteadyClock::now();
  double train_s = 0;  // this session's, for the run's images/s without a window
  // Each step's loss, kept on the device (one copy a step, no synchronization): the epoch's mean,
  // and the first step whose loss is not finite, are read once at its end.
  const torch::Tensor epoch_losses =
      torch::zeros({spe}, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
  // fp16: each step's found-inf flag, kept and read as its loss is, for the steps the scaler
  // skipped.
  const torch::Tensor epoch_found =
      scaler_ ? torch::zeros({spe}, scaler_->found_inf().options()) : torch::Tensor();
  std::int64_t step = first_epoch_ * spe;
  for (std::int64_t e = first_epoch_; e < config_.epochs; ++e) {
    const auto t_epoch = SteadyClock::now();
    EpochRecord rec;
    rec.epoch = e;
    rec.steps = train_epoch(step, window, result, progress, epoch_losses, epoch_found);
    if (rec.steps < spe) break;  // a partial epoch: its steps are recorded, not evaluated or saved
    const torch::Tensor losses = epoch_losses.narrow(0, 0, rec.steps);
    rec.train_loss = losses.sum().item<double>() / static_cast<double>(rec.steps);  // drains
    if (!std::isfinite(rec.train_loss) && note_nonfinite(result, losses, e * spe, e)) break;
    rec.train_s = s_since(t_epoch);
    train_s += rec.train_s;
    rec.images_per_s = static_cast<double>(rec.steps * batch * world) / rec.train_s;
    if (scaler_) note_loss_scaling(rec, epoch_found.narrow(0, 0, rec.steps), e * spe, result);
    rec.lr = lr_schedule_->lr_at(step - 1);
    const bool cut = evaluate_epoch(rec);
    rec.elapsed_s = elapsed_before + s_since(t_run);
    if (note_nonfinite_eval(result, rec)) break;
    note_best(result, rec, config_.target_top1);
    if (checkpoints_) {
      std::vector<EpochRecord> history = result.epochs;
      history.push_back(rec);
      rec.checkpoint = write_checkpoint(e + 1, history, rec.elapsed_s);
    }
    rec.epoch_s = s_since(t_epoch);
    result.epochs.push_back(rec);
    if (epoch_progress_) epoch_progress_(result.epochs.back());
    if (result.target_reached || cut) break;
  }
  window.close();
  if (!config_.capture_at) {
    result.elapsed_s = train_s;
    if (train_s > 0) {
      result.images_per_s = static_cast<double>(result.steps.size() * batch) / train_s;
    }
  }
}

}  // namespace workload
