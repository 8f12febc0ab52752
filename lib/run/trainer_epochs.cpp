// The Trainer's --epochs run: epochs of steps, evaluations and checkpoints at their ends, and a
// capture window anywhere (lib/run/trainer.h).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "data_pipeline/data_error.h"
#include "data_pipeline/hash64.h"
#include "lib/device/nvtx.h"
#include "lib/device/torch_trace.h"
#include "lib/dist/distributed.h"
#include "lib/report/report.h"
#include "lib/run/trainer.h"

namespace workload {

namespace dp = data_pipeline;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

namespace {

double s_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr const char* kParam = "param/";
constexpr const char* kBuffer = "buffer/";
constexpr const char* kMomentum = "momentum/";

// The checkpoint's tensors by name, each taken once.
class SavedTensors {
 public:
  SavedTensors(const Checkpoint& c, std::string path) : path_(std::move(path)) {
    for (const auto& [name, t] : c.tensors) by_name_.emplace(name, t);
  }
  // `name`'s tensor, checked against `like`'s shape; undefined when absent and `optional`.
  torch::Tensor take(const std::string& name, const torch::Tensor& like, bool optional = false) {
    const auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      if (optional) return {};
      throw CheckpointError("checkpoint " + path_ + ": no tensor " + name);
    }
    if (it->second.sizes() != like.sizes() || it->second.scalar_type() != like.scalar_type()) {
      throw CheckpointError("checkpoint " + path_ + ": tensor " + name + " is " +
                            c10::str(it->second.scalar_type(), it->second.sizes()) +
                            ", the model's " + c10::str(like.scalar_type(), like.sizes()));
    }
    return it->second;
  }

 private:
  std::string path_;
  std::map<std::string, torch::Tensor> by_name_;
};

// The split's images (paths below the dataset, labels, sizes) as one hex digest.
std::string split_digest(const dp::Food101Index& index) {
  std::uint64_t h = 0;
  std::error_code ec;
  for (const dp::Sample& s : index.samples()) {
    const std::string rel = s.path.lexically_relative(index.dataset_dir()).generic_string();
    const auto size = static_cast<std::uint64_t>(fs::file_size(s.path, ec));
    h = dp::hash64(rel.data(), rel.size(), h);
    h = dp::hash64(&s.label, sizeof(s.label), h);
    h = dp::hash64(&size, sizeof(size), h);
  }
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(h));
  return out;
}

}  // namespace

Json Trainer::fingerprint(const RunLrSchedule& plan) const {
  Json f;
  f["model"] = "resnet50";
  f["classes"] = num_classes_;
  f["train_images"] = index_ ? index_->size() : 0;
  f["precision"] = to_string(config_.precision);
  f["memory_format"] = to_string(config_.loader.transform.layout);
  f["world_size"] = dist_ ? dist_->world_size() : 1;
  f["batch_size"] = config_.loader.batch_size;
  f["image_size"] = config_.loader.transform.image_size;
  f["seed"] = config_.loader.seed;
  f["optimizer_steps"] = plan.options.total_steps;
  f["lr_schedule"] = to_string(plan.options.kind);
  f["peak_lr"] = plan.options.peak_lr;
  f["lr_warmup_steps"] = plan.options.warmup_steps;
  f["momentum"] = config_.momentum;
  f["weight_decay"] = config_.weight_decay;
  f["label_smoothing"] = config_.label_smoothing;
  // The split itself, not its counts alone: another dataset of as many images does not resume.
  if (!config_.checkpoint_dir.empty() && index_) f["train_split"] = split_digest(*index_);
  return f;
}

void Trainer::restore_model(const Checkpoint& c) {
  SavedTensors saved(c, resume_path_);
  torch::NoGradGuard no_grad;
  // Copied into the model's own tensors: their layout (channels_last) and identity stay.
  for (const auto& p : model_->named_parameters()) {
    p.value().copy_(saved.take(kParam + p.key(), p.value()));
  }
  for (const auto& b : model_->named_buffers()) {
    b.value().copy_(saved.take(kBuffer + b.key(), b.value()));
  }
}

void Trainer::restore_optimizer(const Checkpoint& c) {
  SavedTensors saved(c, resume_path_);
  ForeachSgd::State state;
  for (const auto& p : model_->named_parameters()) {
    state.momentum.push_back(saved.take(kMomentum + p.key(), p.value(), /*optional=*/true));
  }
  state.steps = c.meta.value("optimizer_steps_done", std::int64_t{0});
  try {
    optimizer_->load_state(state);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError("checkpoint " + resume_path_ + ": " + e.what());
  }
}

CheckpointRecord Trainer::write_checkpoint(std::int64_t epochs_done,
                                           const std::vector<EpochRecord>& done, double elapsed_s) {
  const auto t = Clock::now();
  Phase range(nvtx::kCheckpoint, &tracker_);
  CheckpointRecord out;
  out.path = checkpoints_->file_for(epochs_done);
  if (!dist_ || dist_->rank() == 0) {
    Checkpoint c;
    c.meta["format"] = "train_resnet50 checkpoint";
    c.meta["fingerprint"] = fingerprint_;
    c.meta["epochs_done"] = epochs_done;
    const ForeachSgd::State state = optimizer_->state();
    c.meta["optimizer_steps_done"] = state.steps;
    c.meta["elapsed_s"] = elapsed_s;
    Json epochs = Json::array();
    for (const EpochRecord& e : done) epochs.push_back(epoch_json(e));
    c.meta["epochs"] = epochs;
    const auto params = model_->named_parameters();
    for (const auto& p : params) c.tensors.emplace_back(kParam + p.key(), p.value());
    for (const auto& b : model_->named_buffers())
      c.tensors.emplace_back(kBuffer + b.key(), b.value());
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (state.momentum[i].defined()) {
        c.tensors.emplace_back(kMomentum + params[i].key(), state.momentum[i]);
      }
    }
    out.path = checkpoints_->write(epochs_done, c, &out.bytes);
  }
  out.ms = std::chrono::duration<double, std::milli>(Clock::now() - t).count();
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

void Trainer::run_epochs(RunResult& result, const Progress& progress) {
  const std::int64_t spe = steps_per_epoch_;
  const std::int64_t batch = config_.loader.batch_size;
  const int world = dist_ ? dist_->world_size() : 1;
  double elapsed_before = 0;
  if (resume_) {
    elapsed_before = resume_->meta.value("elapsed_s", 0.0);
    result.resumed_from = resume_path_;
    if (resume_->meta.contains("epochs") && resume_->meta["epochs"].is_array()) {
      for (const Json& e : resume_->meta["epochs"]) {
        EpochRecord rec = epoch_from_json(e);
        rec.resumed = true;
        result.epochs.push_back(rec);
      }
    }
    resume_.reset();  // its tensors are in place
  }
  for (const EpochRecord& e : result.epochs) {
    if (e.eval && (!result.best_top1 || e.eval->top1 > *result.best_top1)) {
      result.best_top1 = e.eval->top1;
      result.best_top1_epoch = e.epoch;
      result.time_to_best_top1_s = e.elapsed_s;
    }
    if (e.eval && config_.target_top1 && e.eval->top1 >= *config_.target_top1) {
      result.target_reached = true;
    }
  }
  if (result.target_reached) return;  // the checkpoint's run had already reached it
  // The loader's epoch e is the run's epoch e: a resumed run reads its next epoch's batches.
  if (first_epoch_ > 0) input_->reset_to(first_epoch_);

  // The capture window: steps [capture_at, capture_at + --steps) and what lies between them.
  ProfilerCapture capture(device_.is_cuda());
  std::unique_ptr<TorchTrace> trace;
  std::optional<Phase> window;
  bool window_done = false;
  Clock::time_point t_window;
  const std::int64_t window_first = config_.capture_at.value_or(-1);
  const std::int64_t window_end = window_first + config_.steps;
  const auto open_window = [&] {
    device_synchronize();  // the window starts with nothing queued before it
    if (!outputs_.torch_trace.empty()) {
      trace = std::make_unique<TorchTrace>(outputs_.torch_trace, device_.is_cuda());
    }
    capture.start();
    result.capture_started = capture.started();
    if (trace) trace->start();
    t_window = Clock::now();
    window.emplace(nvtx::kCaptureWindow);
  };
  const auto close_window = [&] {
    {
      const auto t = Clock::now();
      Phase r(nvtx::kCaptureDrain);
      device_synchronize();
      result.capture_drain_ms = std::chrono::duration<double, std::milli>(Clock::now() - t).count();
    }
    window.reset();
    result.elapsed_s = s_since(t_window);
    if (trace) {
      trace->stop_and_save();
      result.torch_trace = trace->path();
    }
    const auto t_stop = Clock::now();
    capture.stop();
    result.profiler_stop_ms =
        capture.started() ? std::chrono::duration<double, std::milli>(Clock::now() - t_stop).count()
                          : 0.0;
    if (result.elapsed_s > 0) {
      result.images_per_s = static_cast<double>(result.steps.size() * batch) / result.elapsed_s;
    }
    window_done = true;
  };

  const auto t_run = Clock::now();
  double train_s = 0;  // this session's, for the run's images/s without a window
  // Each step's loss, kept on the device (one copy a step, no synchronization): the epoch's mean,
  // and the first step whose loss is not finite, are read once at its end.
  const torch::Tensor epoch_losses =
      torch::zeros({spe}, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
  bool stopped = false;
  std::int64_t g = first_epoch_ * spe;
  for (std::int64_t e = first_epoch_; e < config_.epochs && !stopped; ++e) {
    const auto t_epoch = Clock::now();
    std::int64_t done = 0;
    for (std::int64_t b = 0; b < spe; ++b, ++g) {
      if (stop_->at_boundary()) {
        stopped = true;
        break;
      }
      if (g == window_first) open_window();
      const bool in_window = window.has_value();
      std::vector<StepRecord>& into = window_first < 0 || in_window ? result.steps
                                      : window_done                 ? result.steps_after_capture
                                                                    : result.warmup_steps;
      const int index =
          in_window ? static_cast<int>(g - window_first) : static_cast<int>(into.size());
      run_step_ = g;
      const bool ran = guarded_step(index, !in_window, into, progress);
      run_step_.reset();
      if (!ran) {
        stopped = true;
        break;
      }
      epoch_losses.select(0, b).copy_(executor_->loss().detach());
      ++done;
      if (in_window && g + 1 == window_end) close_window();
    }
    if (stopped) break;  // a partial epoch: its steps are recorded, not evaluated or saved
    EpochRecord rec;
    rec.epoch = e;
    rec.steps = done;
    const torch::Tensor losses = epoch_losses.narrow(0, 0, done);
    rec.train_loss = losses.sum().item<double>() / static_cast<double>(done);  // drains the steps
    if (!std::isfinite(rec.train_loss) && note_nonfinite(result, losses, e * spe, e)) break;
    rec.train_s = s_since(t_epoch);
    train_s += rec.train_s;
    rec.images_per_s = static_cast<double>(done * batch * world) / rec.train_s;
    rec.lr = lr_schedule_->lr_at(g - 1);
    const bool last = e + 1 == config_.epochs;
    if (evaluator_ && ((e + 1) % config_.eval_every == 0 || last)) {
      try {
        rec.eval = evaluator_->run(&tracker_);
      } catch (const dp::Cancelled&) {
        // A stop during the evaluation: the epoch's training is whole, so it is kept (recorded and
        // saved) without the evaluation, and the run stops after the checkpoint.
        rec.eval_cut = true;
        stopped = true;
      } catch (const dp::DataError& ex) {
        throw dp::DataError("the evaluation after epoch " + std::to_string(e) + ": " + ex.what());
      } catch (const c10::Error& ex) {
        throw std::runtime_error(std::string(tracker_.current) + " of the evaluation after epoch " +
                                 std::to_string(e) + ": " + ex.what_without_backtrace());
      } catch (const std::exception& ex) {
        throw std::runtime_error(std::string(tracker_.current) + " of the evaluation after epoch " +
                                 std::to_string(e) + ": " + ex.what());
      }
    }
    rec.elapsed_s = elapsed_before + s_since(t_run);
    if (rec.eval && !std::isfinite(rec.eval->loss) && result.nonfinite_loss.empty()) {
      result.nonfinite_loss = "the evaluation after epoch " + std::to_string(e) + ": loss " +
                              std::to_string(rec.eval->loss);
      if (!config_.allow_nonfinite_loss) {
        result.nonfinite_stopped = true;
        break;
      }
    }
    if (rec.eval && (!result.best_top1 || rec.eval->top1 > *result.best_top1)) {
      result.best_top1 = rec.eval->top1;
      result.best_top1_epoch = e;
      result.time_to_best_top1_s = rec.elapsed_s;
    }
    // Only a run whose every loss was finite reaches its target.
    if (rec.eval && config_.target_top1 && rec.eval->top1 >= *config_.target_top1 &&
        result.nonfinite_loss.empty()) {
      result.target_reached = true;
    }
    if (checkpoints_) {
      std::vector<EpochRecord> history = result.epochs;
      history.push_back(rec);
      rec.checkpoint = write_checkpoint(e + 1, history, rec.elapsed_s);
    }
    rec.epoch_s = s_since(t_epoch);
    result.epochs.push_back(rec);
    if (epoch_progress_) epoch_progress_(result.epochs.back());
    if (result.target_reached || stopped) break;
  }
  if (window) close_window();
  if (window_first < 0) {
    result.elapsed_s = train_s;
    if (train_s > 0) {
      result.images_per_s = static_cast<double>(result.steps.size() * batch) / train_s;
    }
  }
}

}  // namespace workload
