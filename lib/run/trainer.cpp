// The training workload: ResNet-50 steps with the article's NVTX ranges and a capture window.
#include "lib/run/trainer.h"
#include "lib/core/usage_error.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <utility>

#include "data_pipeline/data_error.h"
#include "lib/core/elapsed.h"
#include "lib/core/output_file.h"
#include "lib/distributed/data_parallel.h"
#include "lib/distributed/distributed.h"
#include "lib/instrument/nvtx.h"
#include "lib/model/norm_activation.h"
#include "lib/report/environment.h"
#include "lib/report/report.h"
#include "lib/run/capture_window.h"
#include "lib/run/checkpoint_state.h"
#include "lib/run/error_context.h"
#include "lib/run/train_cli.h"

namespace workload {

namespace dp = data_pipeline;
using Clock = SteadyClock;

namespace {
// A rank's own path of `flag`'s output, checked as the flag's path was.
std::string rank_output(const std::string& flag, const std::string& path,
                        const std::optional<LaunchEnv>& dist) {
  if (path.empty() || !dist) return path;
  std::string mine = rank_output_path(path, dist->rank);
  check_output_file(flag + " (rank " + std::to_string(dist->rank) + ")", mine);
  return mine;
}
}  // namespace

// The checkpoint directory: rank 0 locks it (one run writes there); a run that does not resume
// refuses one that holds checkpoints unless --start-over deletes them; --resume reads the newest.
void Trainer::open_checkpoints() {
  checkpoints_.emplace(config_.checkpoint_dir);
  const bool writer = !dist_ || dist_->rank() == 0;
  if (writer) checkpoint_lock_.emplace(config_.checkpoint_dir);
  if (!config_.resume) {
    if (config_.start_over) {
      if (writer) {
        const int removed = checkpoints_->remove_all();
        if (removed > 0) {
          notices_.push_back("--start-over: deleted " + std::to_string(removed) +
                             " checkpoint(s) in " + config_.checkpoint_dir);
        }
      }
    } else if (const std::optional<std::string> newest = checkpoints_->newest()) {
      throw UsageError("--checkpoint-dir " + config_.checkpoint_dir + ": holds checkpoints (" +
                       std::to_string(checkpoints_->files().size()) + ", the newest " + *newest +
                       "); --resume to continue their run, --start-over to delete them, or "
                       "another directory");
    }
    return;
  }
  const std::optional<std::string> newest = checkpoints_->newest();
  if (!newest) {
    notices_.push_back("--resume: no checkpoint in " + config_.checkpoint_dir +
                       " yet: the run starts at its first epoch");
    return;
  }
  try {
    resume_ = read_checkpoint_file(*newest);
  } catch (const CheckpointError& e) {
    const std::vector<std::string> files = checkpoints_->files();
    if (files.size() < 2) throw;
    throw CheckpointError(std::string(e.what()) + "; the one before it, " +
                          files[files.size() - 2] +
                          ", may be whole: move the newest away to resume from it");
  }
  resume_path_ = *newest;
  check_resumed_fingerprint(*newest);
  first_epoch_ = resume_->meta.value("epochs_done", std::int64_t{-1});
  if (checkpoints_->file_for(first_epoch_) != *newest) {
    throw CheckpointError("checkpoint " + *newest + ": holds the run after " +
                          std::to_string(first_epoch_) +
                          " epochs, which its name does not say; it was renamed or is not this "
                          "directory's");
  }
}

// The checkpoint resumed from must be this run's: the same fingerprint. Its schedule spans its
// --epochs, so a resumed run cannot lengthen it; that mismatch (the run's optimizer steps, and the
// warm-up they set, differ and nothing else does) is named as the flag. Another warm-up alone is
// named as the field, as every other setting is.
void Trainer::check_resumed_fingerprint(const std::string& path) {
  nlohmann::ordered_json found = resume_->meta.value("fingerprint", nlohmann::ordered_json());
  nlohmann::ordered_json expected = fingerprint_;
  if (found.is_object() && !found.contains("train_split")) {
    expected.erase("train_split");
    notices_.push_back("--resume: " + path +
                       " predates the split's digest in checkpoints: its dataset is not checked");
  }
  const std::string diff = fingerprint_mismatch(found, expected);
  if (diff.empty()) return;
  nlohmann::ordered_json found_rest = found, expected_rest = expected;
  for (const char* key : {"optimizer_steps", "lr_warmup_steps"}) {
    if (found_rest.is_object()) found_rest.erase(key);
    expected_rest.erase(key);
  }
  const bool other_length =
      !found.is_object() || found.value("optimizer_steps", std::int64_t{-1}) !=
                                expected.value("optimizer_steps", std::int64_t{-1});
  if (other_length && fingerprint_mismatch(found_rest, expected_rest).empty() &&
      steps_per_epoch_ > 0) {
    const std::int64_t epochs = found.value("optimizer_steps", std::int64_t{0}) / steps_per_epoch_;
    throw UsageError("--epochs " + std::to_string(config_.epochs) + ": " + path + " is a run of " +
                     std::to_string(epochs) +
                     " epochs, and its learning-rate schedule spans them; a resumed run keeps "
                     "them: pass --epochs " +
                     std::to_string(epochs) + " (or --start-over for a run of another length)");
  }
  throw CheckpointError("checkpoint " + path + ": made by another run (" + diff +
                        "); resume with its settings, --start-over to delete its checkpoints, or "
                        "give another --checkpoint-dir");
}

// --capture-at's window, once the run's length (and where a resumed run starts) is known: inside
// this session's steps, whole.
void Trainer::check_capture_window() const {
  const std::int64_t total = static_cast<std::int64_t>(config_.epochs) * steps_per_epoch_;
  const std::int64_t first = first_epoch_ * steps_per_epoch_;
  const std::int64_t at = *config_.capture_at, end = at + config_.steps;
  const std::string run = "the run's steps are 0 to " + std::to_string(total - 1) + " (" +
                          std::to_string(config_.epochs) + " epochs of " +
                          std::to_string(steps_per_epoch_) + ")";
  if (at >= total) {
    throw UsageError("--capture-at " + std::to_string(at) + ": " + run +
                     ", so the window would never open");
  }
  if (end > total) {
    throw UsageError("--capture-at " + std::to_string(at) + " --steps " +
                     std::to_string(config_.steps) + ": the window would end at step " +
                     std::to_string(end - 1) + ", and " + run);
  }
  if (at < first) {
    throw UsageError("--capture-at " + std::to_string(at) + ": this run resumes at step " +
                     std::to_string(first) + " (epoch " + std::to_string(first_epoch_) +
                     "), after the window would open");
  }
}

RunOutputs run_outputs(const TrainConfig& config, const std::optional<LaunchEnv>& dist) {
  RunOutputs out;
  out.report = rank_output("--report", config.report, dist);
  out.torch_trace = rank_output("--torch-profiler-trace", config.torch_profiler_trace, dist);
  return out;
}

Trainer::Trainer(TrainConfig config, std::optional<LaunchEnv> dist,
                 std::shared_ptr<StopRequest> stop)
    : config_(std::move(config)),
      stop_request_(stop ? std::move(stop) : std::make_shared<StopRequest>()) {
  validate_run(config_);
  check_step_executor(config_, dist.has_value());
  outputs_ = run_outputs(config_, dist);
  // A rank of a distributed run uses GPU LOCAL_RANK (of those CUDA_VISIBLE_DEVICES shows).
  const int gpu = dist ? dist->local_rank : 0;
  configure_process(gpu);
  index_splits();
  open_device(gpu);
  join_ranks(dist);
  plan_run();
  build_model();
  build_optimizer();
  build_step();
  collect_notices();
}

void Trainer::configure_process(int gpu) {
  if (config_.device == Device::kCuda) {
    device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(gpu));
  }
  nvtx::set_enabled(config_.nvtx);  // before the source's threads start: they obey it too
  at::set_num_threads(config_.intra_op_threads);
  torch::manual_seed(config_.loader.seed);
}

void Trainer::index_splits() {
  if (config_.synthetic) return;
  index_ = std::make_shared<const dp::Food101Index>(
      dp::Food101Index::load(config_.data, to_string(config_.split)));
  num_classes_ = index_->num_classes();
  if (config_.epochs > 0 && config_.eval_every > 0) {
    eval_index_ = std::make_shared<const dp::Food101Index>(
        dp::Food101Index::load(config_.data, to_string(config_.eval_split)));
  }
}

void Trainer::open_device(int gpu) {
  if (!device_.is_cuda()) return;
  use_cuda_device(gpu, config_.cudnn_benchmark, config_.deterministic);
  step_stream_.emplace(input_wants_priority_stream(config_) || executor_wants_own_stream(config_));
}

void Trainer::join_ranks(const std::optional<LaunchEnv>& dist) {
  if (dist) {
    // The rendezvous, once the device is set (NCCL binds to it) and before the dataset's shard
    // and the model's broadcast need it.
    dist_ = std::make_unique<Distributed>(
        *dist, config_.dist_backend, device_, std::chrono::seconds(config_.dist_timeout_s),
        DistLiveness{std::chrono::seconds(config_.dist_peer_timeout_s), stop_request_});
  }
  stop_ = std::make_unique<StopControl>(dist_.get(), stop_request_);
}

void Trainer::plan_run() {
  // Every warm-up and captured step is an optimizer step, over the global batch of every rank;
  // before the last resort, whose report records it too.
  const int world = dist_ ? dist_->world_size() : 1;
  if (config_.epochs > 0) {
    // The loader's epoch, drop_last: whole batches of this rank's (padded) shard.
    const std::int64_t shard = dp::shard_size(index_->size(), world);
    steps_per_epoch_ = shard / config_.loader.batch_size;
    if (steps_per_epoch_ == 0) {
      throw dp::DataError(index_->dataset_dir().string() + "/meta/" + index_->split() +
                          ".txt: split '" + index_->split() + "' has " +
                          std::to_string(index_->size()) + " images (" + std::to_string(shard) +
                          " a rank), fewer than one batch of " +
                          std::to_string(config_.loader.batch_size) + ": no epoch to train");
    }
  }
  const LrPlan lr_plan = plan_lr(config_, world, steps_per_epoch_);
  if (config_.mode == RunMode::kTrain) lr_plan_ = lr_plan;
  lr_schedule_.emplace(lr_plan.options);
  if (dist_) install_last_resort();
  if (config_.epochs > 0) {
    fingerprint_ = run_fingerprint(config_, lr_plan, num_classes_, index_.get(), world);
  }
  if (!config_.checkpoint_dir.empty()) open_checkpoints();
  if (config_.epochs > 0 && config_.capture_at) check_capture_window();
}

const ConvBnOps* Trainer::conv_bn_ops_for_run() {
  const ConvBnOps* cudnn =
      cudnn_conv_bn_ops(config_.deterministic ? SumOrder::kOrdered : SumOrder::kEngines);
  const bool fp16_cuda = config_.precision == Precision::kFp16 && device_.is_cuda();
  if (fp16_cuda && cudnn != nullptr) return cudnn;
  notices_.push_back(std::string("--fuse-conv-bn: the fused bottleneck runs on LibTorch's kernels, "
                                 "slower than the modules (") +
                     (cudnn == nullptr ? "this build has no cuDNN 9 graph API"
                                       : "cuDNN's fused engines take fp16 on CUDA only") +
                     "); the same arithmetic, to check it, not to time it");
  return &reference_conv_bn_ops();
}

void Trainer::build_model() {
  model_ = ResNet50(num_classes_);
  model_->to(device_);
  if (config_.loader.transform.layout != dp::ImageLayout::kNchw) to_channels_last(*model_);
  if (config_.fused_bn) model_->set_norm_activation(fused_norm_activation());
  if (config_.fuse_conv_bn) model_->set_conv_bn_ops(conv_bn_ops_for_run());
  model_->set_stem_pad(config_.stem_pad);
  if (config_.precision != Precision::kFp32) {
    model_->set_cast_weights_together(resolve_weight_cast(config_.weight_cast, dist_ != nullptr) ==
                                      WeightCast::kTogether);
  }
  // Before DDP's broadcast of rank 0's weights: the same values.
  if (resume_) restore_model(*resume_, resume_path_, *model_);
  if (dist_) {
    // After the device and the memory format (the buckets' views follow the gradients' layout).
    // Collectives already: a peer lost here ends the setup with the watchdog's verdict.
    try {
      ddp_ = std::make_unique<DataParallel>(*dist_, *model_,
                                            static_cast<std::int64_t>(config_.bucket_mb) << 20,
                                            config_.broadcast_buffers, config_.grad_bucket_view);
    } catch (const std::exception&) {
      if (const std::optional<DistVerdict> verdict = dist_->await_verdict()) {
        dist_->stand_down();
        throw PeerLost(*verdict);
      }
      throw;
    }
  }
  if (config_.mode == RunMode::kForward && config_.forward_bn == ForwardBn::kEval) {
    model_->eval();
  } else {
    model_->train();
  }
}

void Trainer::build_optimizer() {
  // A replayed graph reads the LR on the device; eager steps keep the article's kernels unless
  // --lr-on-device.
  optimizer_ = std::make_unique<ForeachSgd>(
      model_->parameters(), *lr_schedule_, config_.momentum, config_.weight_decay,
      config_.cuda_graph || config_.lr_on_device ? ForeachSgd::LrSource::kDevice
                                                 : ForeachSgd::LrSource::kHost);
  if (lr_plan_) lr_plan_->lr_on_device = optimizer_->lr_on_device();
  if (resume_) restore_optimizer(*resume_, resume_path_, *model_, *optimizer_);
  if (config_.precision == Precision::kFp16 && config_.mode == RunMode::kTrain) {
    scaler_ = std::make_unique<LossScaler>(device_);
    if (resume_) restore_scaler(*resume_, resume_path_, *scaler_);
  }
}

void Trainer::build_step() {
  input_ =
      make_input_source({config_, index_, device_, num_classes_, dist_ ? dist_->world_size() : 1,
                         dist_ ? dist_->rank() : 0, notices_});
  executor_ = make_step_executor(
      {config_, model_, *optimizer_, ddp_.get(), scaler_.get(), device_, notices_});
  // A single process stops at once, even in batch_wait; ranks stop together
  // (lib/run/stop_control.h).
  stop_->add_cancel_hook([this] { input_->cancel(); });
  if (eval_index_) {
    try {
      evaluator_ =
          std::make_unique<Evaluator>(config_, eval_index_, model_, device_, dist_.get(), notices_);
    } catch (const dp::DataError&) {
      throw;  // names its file
    } catch (const std::exception& e) {
      throw std::runtime_error("the evaluation's input (--eval-batch-size " +
                               std::to_string(eval_input_config(config_).loader.batch_size) +
                               ", --eval-split " + to_string(config_.eval_split) +
                               "): " + e.what());
    }
    stop_->add_cancel_hook([this] { evaluator_->cancel(); });
  }
  stalls_ = std::make_unique<StallInjector>(config_.inject_stall, *stop_);
  tracker_.on_enter = [this](const char* phase) { stalls_->at(phase); };
}

void Trainer::collect_notices() {
  // The evaluation's source adds the training source's notices again.
  std::vector<std::string> unique;
  for (const std::string& n : notices_) {
    if (std::find(unique.begin(), unique.end(), n) == unique.end()) unique.push_back(n);
  }
  notices_ = std::move(unique);
  if (config_.epochs > 0 && !config_.capture_at && device_.is_cuda()) {
    notices_.push_back(
        "--epochs without --capture-at: no capture window (nsys "
        "--capture-range=cudaProfilerApi records nothing)");
  }
  if (!device_.is_cuda()) {
    notices_.push_back(std::string("CPU run: cudaProfilerStart/Stop skipped") +
                       (config_.nvtx ? " (the NVTX ranges are still emitted)" : ""));
  }
}

// The watchdog's last resort reads this trainer: stand it down before anything goes. Then stop the
// source's threads before the model and streams go: one may be waiting on a fence that references a
// CUDA event.
Trainer::~Trainer() {
  if (dist_) dist_->stand_down();
  if (input_) input_->stop();
  if (evaluator_) evaluator_->stop();
}

void Trainer::install_last_resort() {
  // Copies of what the report needs, and the step counter (atomic): nothing the stuck thread might
  // be changing. stand_down() in ~Trainer keeps the counter alive while this can run.
  // Called before the model and the input exist (a verdict may come while DDP sets the model up):
  // the report then holds the configuration, the machine and the ranks.
  RunFacts known = facts();
  dist_->set_give_up([known = std::move(known), path = outputs_.report, stop = stop_.get(),
                      request = stop_request_](const DistVerdict& verdict) mutable {
    std::string extra = " (in step " + std::to_string(stop->steps_started()) + ")";
    const int signal = request->requested();
    known.partial = PartialFacts{
        "written by the distributed watchdog: the trainer's thread did not come back after the "
        "abort, so the steps' records, the summary and the digest are missing",
        stop->steps_started()};
    known.result.interrupted = true;
    known.result.interrupt_signal = signal_name(signal < 0 ? 0 : signal);
    known.result.aborted = verdict.reason;
    known.result.lost_rank = verdict.kind == DistVerdict::Kind::kPeerLost ? verdict.rank : -1;
    if (!path.empty()) {
      try {
        write_report(path, report_json(known));
        extra += "; partial report written to " + path;
      } catch (const std::exception& e) {
        extra += std::string("; no report: ") + e.what();
      }
    }
    end_process_on_verdict(verdict, known.dist->env.rank, signal, extra);
  });
}

RunFacts Trainer::facts(RunResult result) const {
  RunFacts f;
  f.config = config_;
  f.environment = collect_environment(device_.is_cuda());
  if (!model_.is_empty()) {
    std::optional<WeightCast> cast;  // what ran: bf16 and fp16 only
    if (config_.precision != Precision::kFp32) {
      cast = model_->cast_weights_together() ? WeightCast::kTogether : WeightCast::kPerLayer;
    }
    f.model = ModelFacts{num_classes_, parameters(), device_.is_cuda(), cast};
  }
  if (input_) {
    if (const std::optional<HostRingFacts> ring = input_->host_ring()) {
      f.loader = LoaderFacts{*ring, dataset_images()};
    }
    f.gpu_decode = input_->gpu_decode();
  }
  f.lr_schedule = lr_plan_;
  if (scaler_) {
    try {
      f.loss_scaling = LossScalingFacts{scaler_->options(), scaler_->state()};
    } catch (const std::exception&) {
      // A device that failed cannot be read: the report goes without the scale.
    }
  }
  f.result = std::move(result);
  if (dist_) f.dist = DistFacts{dist_->env(), dist_->backend(), dist_->nccl_version()};
  return f;
}

std::int64_t Trainer::parameters() const { return count_parameters(*model_); }

StepInputs Trainer::load(StepRecord& rec) {
  const auto t_wait = Clock::now();
  {
    Phase r(nvtx::kBatchWait, &tracker_);
    input_->next();
  }
  rec.batch_wait_ms = ms_since(t_wait);
  const auto t_submit = Clock::now();
  StepInputs inputs;
  {
    Phase r(nvtx::kH2dSubmit, &tracker_);
    const dp::BatchInfo& info = input_->info();
    rec.digest = info.digest();
    rec.epoch = info.epoch();
    rec.batch_in_epoch = info.index_in_epoch();
    rec.skipped = info.skipped();
    inputs = input_->submit();
    executor_->feed(inputs);
  }
  rec.h2d_submit_ms = ms_since(t_submit);
  return inputs;
}

StepRecord Trainer::step(int index, bool warmup) {
  StepRecord rec;
  rec.index = index;
  rec.warmup = warmup;
  stalls_->begin_step(index, warmup, &rec.injected_stalls);
  // The optimizer counts its steps on the device; the host's count, for the record: the warm-up's,
  // then the captured ones after every warm-up step (a capture follows a whole warm-up).
  // An --epochs run numbers its steps itself (run_step_).
  rec.step = run_step_;
  if (lr_plan_) {
    rec.lr = lr_schedule_->lr_at(run_step_ ? *run_step_ : warmup ? index : config_.warmup + index);
  }
  const StepPlan& plan = executor_->plan();
  const auto t_step = Clock::now();
  PhaseTimes times;
  times.reserve(16);
  {
    Phase step_range(nvtx::kTorchStep, &tracker_);
    const PhaseTiming timing(tracker_, times);  // the ranges inside torch_step, not itself
    StepInputs inputs;
    {
      Phase data_range(nvtx::kDataLoad, &tracker_);
      inputs = load(rec);
      run_phases(*executor_, plan.load, inputs, &tracker_);
    }
    run_phases(*executor_, plan.device, inputs, &tracker_);
    input_->release_after_step();
    if (config_.sync_every_step) {
      // The implicit-synchronization pitfall, on purpose: .item() waits for the device.
      Phase r(nvtx::kLossItem, &tracker_);
      rec.loss = executor_->loss().item<float>();
    }
  }
  rec.step_ms = ms_since(t_step);
  rec.phase_ms.assign(times.begin(), times.end());
  return rec;
}

bool Trainer::guarded_step(int i, bool warmup, std::vector<StepRecord>& into,
                           const Progress& progress) {
  const std::string where =
      run_step_ ? "step " + std::to_string(*run_step_) + " (epoch " +
                      std::to_string(*run_step_ / steps_per_epoch_) + ")"
                : std::string(warmup ? "warm-up" : "captured") + " step " + std::to_string(i);
  try {
    into.push_back(step(i, warmup));
    stop_->step_done();
  } catch (const dp::Cancelled&) {
    return false;
  } catch (...) {
    // A DataError already names the file.
    rethrow_in_context(tracker_.current, where, DataErrorContext::kKeep);
  }
  if (progress) progress(into.back());
  return true;
}

void Trainer::capture_window(RunResult& result, const Progress& progress) {
  CaptureWindow window(result, device_.is_cuda(), outputs_.torch_trace, config_.loader.batch_size);
  if (stop_->at_boundary()) return;
  window.open();
  if (!config_.reuse_iterator) {
    const auto t = Clock::now();
    Phase r(nvtx::kIteratorReset);
    input_->reset();
    result.iterator_reset_ms = ms_since(t);
  }
  for (int i = 0; i < config_.steps && !stop_->at_boundary(); ++i) {
    if (!guarded_step(i, false, result.steps, progress)) break;
  }
  window.close();
}

void Trainer::run_steps(RunResult& result, const Progress& progress) {
  for (int i = 0; i < config_.warmup && !stop_->at_boundary(); ++i) {
    if (!guarded_step(i, true, result.warmup_steps, progress)) break;
  }
  device_synchronize();
  if (executor_->has_preparation() && !stop_->at_boundary()) {
    const Preparation prepared = executor_->prepare();
    result.graph_capture_ms = prepared.graph_capture_ms;
    result.graph_memset_kernels = prepared.graph_memset_kernels;
    result.graph_memset_nodes = prepared.graph_memset_nodes;
  }
  if (dist_ && !stop_->at_boundary()) {
    // Every rank's capture window covers the same steps.
    nvtx::DdpRange range(nvtx::kCaptureBarrier);
    dist_->barrier();
  }
  capture_window(result, progress);
}

// A --warmup + --steps run: the first step whose loss was read (--sync-every-step) and is not
// finite, else the loss read after the drain. The run has ended; a non-finite loss makes it exit 1.
void Trainer::note_nonfinite_steps(RunResult& result) const {
  const auto first_bad = [](const std::vector<StepRecord>& steps) -> const StepRecord* {
    for (const StepRecord& r : steps) {
      if (r.loss && !std::isfinite(*r.loss)) return &r;
    }
    return nullptr;
  };
  if (const StepRecord* r = first_bad(result.warmup_steps)) {
    result.nonfinite_loss =
        "warm-up step " + std::to_string(r->index) + ": loss " + std::to_string(*r->loss);
  } else if (const StepRecord* s = first_bad(result.steps)) {
    result.nonfinite_loss =
        "captured step " + std::to_string(s->index) + ": loss " + std::to_string(*s->loss);
  } else if (result.loss_after_drain && !std::isfinite(*result.loss_after_drain)) {
    result.nonfinite_loss =
        "the last step's loss, read after the drain: " + std::to_string(*result.loss_after_drain);
  }
  result.nonfinite_stopped = !result.nonfinite_loss.empty() && !config_.allow_nonfinite_loss;
}

RunResult Trainer::run(const Progress& progress) {
  // The checkpoint directory is this run's until it ends, however it ends.
  struct ReleaseAfter {
    std::optional<CheckpointLock>& lock;
    ~ReleaseAfter() { lock.reset(); }
  } release_after{checkpoint_lock_};
  RunResult result;
  std::optional<DistVerdict> verdict;
  try {
    if (config_.epochs > 0) {
      run_epochs(result, progress);
    } else {
      run_steps(result, progress);
    }
  } catch (const dp::DataError& e) {
    if (dist_) dist_->announce_failure(e.what());  // this rank's own data: the others stop at once
    throw;
  } catch (const std::exception& e) {
    if (!dist_) throw;
    // A collective that failed on a connection a dead peer closed, or one the watchdog aborted:
    // the run ends here when a peer was lost; otherwise the failure is this rank's own.
    verdict = dist_->await_verdict();
    if (!verdict) {
      dist_->announce_failure(e.what());
      throw;
    }
  }
  // An abort can also end the run without a failure here: NCCL's waits are on the device, and a
  // drain held by a lost peer simply returns once the communicators are aborted.
  if (dist_ && !verdict) verdict = dist_->verdict();
  if (verdict) {
    // No loss or digest: the group is aborted, and on a GPU the device may hold work that waited
    // for the lost peer.
    dist_->stand_down();
    result.interrupted = true;
    result.interrupt_signal = signal_name(std::max(stop_->requested(), 0));
    result.stop_agreed_by = stop_->agreed_by();
    result.aborted = verdict->reason;
    result.lost_rank = verdict->kind == DistVerdict::Kind::kPeerLost ? verdict->rank : -1;
    return result;
  }
  // Read on the host only now, after the drain: inside the window this would synchronize.
  if (const torch::Tensor loss = executor_->loss(); loss.defined()) {
    result.loss_after_drain = loss.item<float>();
  }
  if (config_.epochs == 0) note_nonfinite_steps(result);
  if (dist_) {
    device_synchronize();  // the drain's, when the run stopped before the capture
    result.parameter_digest = parameter_digest(*model_);
    dist_->finish();  // the others may still be ending theirs: keep the store up for them
  }
  result.interrupted = stop_->signal() >= 0;
  if (result.interrupted) result.interrupt_signal = signal_name(stop_->signal());
  result.stop_agreed_by = stop_->agreed_by();
  return result;
}

}  // namespace workload
