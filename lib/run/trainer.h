// The training workload: ResNet-50 steps with the article's NVTX ranges and a capture window.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data_pipeline/food101_index.h"
#include "lib/config/train_config.h"
#include "lib/device/cuda_device.h"
#include "lib/distributed/launch_env.h"
#include "lib/input/input_source.h"
#include "lib/instrument/phase.h"
#include "lib/model/foreach_sgd.h"
#include "lib/model/loss_scaler.h"
#include "lib/model/lr_schedule.h"
#include "lib/model/resnet50.h"
#include "lib/report/run_facts.h"
#include "lib/run/checkpoint.h"
#include "lib/run/evaluator.h"
#include "lib/run/stall_injector.h"
#include "lib/run/stop_control.h"
#include "lib/step/step_executor.h"

namespace workload {

class CaptureWindow;
class Distributed;
class DataParallel;

/// The files a run writes: the user's paths, or in a distributed run each rank's own
/// (rank_output_path: "run.json" -> "run.rank1.json"); empty for none.
struct RunOutputs {
  std::string report;
  std::string torch_trace;
};
/// The outputs of `config` for `dist` (nullopt: a single process), each checked as the flag's own
/// path is (lib/core/output_file.h). \throws UsageError naming the flag and the rank's path.
RunOutputs run_outputs(const TrainConfig& config, const std::optional<LaunchEnv>& dist);

/// Builds the dataset index, model, optimizer, the run's input source (lib/input/input_source.h)
/// and step executor (lib/step/step_executor.h) for `config`, then runs warm-up and the captured
/// steps. Single-threaded use from the thread that created it (the "main thread" of the NVTX tree);
/// the input source's threads are its own.
///
/// The step is exactly
///   torch_step { data_load { batch_wait, h2d_submit, <load phases> }, <device phases>,
///                [loss_item] }
/// where the source takes the batch in batch_wait and puts it on the device in h2d_submit, and the
/// executor's plan (lib/step/step_plan.h) lists the phases it runs: normalize (uint8 batches) in
/// data_load, then forward, zero_grad, backward, optimizer_step (train mode) for the eager step,
/// or graph_replay for --cuda-graph's captured steps. loss_item only with --sync-every-step;
/// per-stage and per-block ranges inside forward with --nvtx-detail layers. In a distributed run
/// the tree is the same; DDP's own work shows in the `ddp` domain (lib/instrument/nvtx.h).
/// The run is: warm-up steps, device synchronize, the executor's preparation (--cuda-graph's
/// `graph_capture`), cudaProfilerStart, capture_window { [iterator_reset], steps, capture_drain },
/// cudaProfilerStop. Nothing inside the window waits for the device before capture_drain.
class Trainer {
 public:
  /// With `dist` (a launcher's environment, lib/distributed/launch_env.h) the trainer is one rank
  /// of a data-parallel run: it rendezvouses with the others, runs on GPU LOCAL_RANK, reads its
  /// shard of the data, and averages gradients as DDP does (lib/distributed/distributed.h), while a
  /// watchdog watches the other ranks (lib/distributed/watchdog.h). `stop`: the process's stop
  /// request, shared with the thread that takes signals so that one ends the rendezvous too (a new
  /// one when null).
  /// \throws UsageError for configurations validate_run() rejects (e.g. --device cuda without a
  ///         GPU), for a rank's output path that cannot be written, and when the rendezvous fails;
  ///         data_pipeline::DataError for dataset problems; PeerLost when a peer is lost before
  ///         the first step. A stop requested during the rendezvous ends the process
  ///         (lib/distributed/distributed.h).
  explicit Trainer(TrainConfig config, std::optional<LaunchEnv> dist = std::nullopt,
                   std::shared_ptr<StopRequest> stop = nullptr);
  /// Stands the watchdog down first (its last resort reads this trainer's stop counter), then stops
  /// the source.
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Called after every step with its host-side record (for progress lines).
  using Progress = std::function<void(const StepRecord&)>;
  /// --epochs: called at every epoch's end, after its evaluation and checkpoint.
  using EpochProgress = std::function<void(const EpochRecord&)>;
  void set_epoch_progress(EpochProgress progress) { epoch_progress_ = std::move(progress); }

  /// Runs warm-up and capture. After request_stop() the run ends at the next step boundary (or at
  /// once when waiting for a batch): the device is drained, a started capture is stopped and the
  /// result is marked interrupted. A failure inside a step is rethrown with the step and the
  /// phase it happened in (DataErrors keep their type); in a distributed run it is first announced
  /// to the other ranks, unless the watchdog finds that a peer was lost: then the run ends there,
  /// marked interrupted and `aborted` (the reason, the lost rank), without the drain's digest.
  RunResult run(const Progress& progress = nullptr);

  /// Asks a running run() to stop, giving the signal number for the report (0 if none). Safe to
  /// call from any thread, e.g. a signal-handling one; returns immediately. A single process stops
  /// at once (a step waiting for its batch, or sleeping in an injected stall, is cut short); the
  /// ranks of a distributed run agree, at their next step boundary, on a step they all stop before
  /// (lib/run/stop_control.h).
  void request_stop(int signal = 0) { stop_->request(signal); }
  /// The value given to request_stop(), or -1 when none was requested.
  int stop_requested() const { return stop_->requested(); }
  /// The signal the run stopped for: this process's request_stop() value, or in a distributed run
  /// the one another rank stopped for (0 for a request without a signal, -1 when none). The
  /// trainer's thread, after run().
  int stop_signal() const { return stop_->signal(); }

  /// The record of the run for its report and summary (lib/report/run_facts.h): `result` with
  /// what this trainer knows of the machine, the model, the input and the ranks. Before run(),
  /// with an empty result, for the lines printed before the first step.
  RunFacts facts(RunResult result = {}) const;

  const TrainConfig& config() const { return config_; }
  /// The files this run writes (this rank's, in a distributed run).
  const RunOutputs& outputs() const { return outputs_; }
  const ResNet50& model() const { return model_; }
  std::int64_t num_classes() const { return num_classes_; }
  std::int64_t parameters() const;
  bool on_cuda() const { return device_.is_cuda(); }
  /// --epochs: training steps an epoch (each rank's), and evaluation steps a pass (0 without).
  std::int64_t steps_per_epoch() const { return steps_per_epoch_; }
  std::int64_t eval_steps_per_pass() const { return evaluator_ ? evaluator_->steps_per_pass() : 0; }
  /// --resume: the checkpoint the run continues from ("" when none) and the epochs it had done.
  const std::string& resumed_from() const { return resume_path_; }
  std::int64_t first_epoch() const { return first_epoch_; }
  /// Images in the split (0 in synthetic mode).
  std::int64_t dataset_images() const { return index_ ? index_->size() : 0; }
  /// Where the batches come from (its host ring and GPU stage counters, for the report).
  const InputSource& input() const { return *input_; }
  /// The data-parallel membership and gradient synchronisation, or nullptr for a single process.
  const Distributed* distributed() const { return dist_.get(); }
  /// One line per notice worth printing once (e.g. pinning unavailable, profiler skipped).
  const std::vector<std::string>& notices() const { return notices_; }

 private:
  // The constructor's stages, in order.
  /// The process's settings for the run: device, NVTX on or off, intra-op threads, the seed.
  void configure_process(int gpu);
  /// The training split's index (and the evaluation's, with --epochs); none in synthetic mode.
  void index_splits();
  /// The GPU and the step's stream, on a CUDA run.
  void open_device(int gpu);
  /// A distributed run's rendezvous, then the stop control (the ranks' agreement on a stop).
  void join_ranks(const std::optional<LaunchEnv>& dist);
  /// The run's length and schedule, the watchdog's last resort, the checkpoint directory (and the
  /// checkpoint resumed from), and --capture-at's window checked against the length.
  void plan_run();
  /// The model on its device in its layout, the checkpoint's weights, DDP, train or eval mode.
  void build_model();
  /// --fuse-conv-bn's pieces: cuDNN's engines for an fp16 run on CUDA where this build has them,
  /// else LibTorch's kernels (a notice says why).
  const ConvBnOps* conv_bn_ops_for_run();
  /// The optimizer over the model's parameters, and the checkpoint's momentum and step count.
  void build_optimizer();
  /// The input source, the step executor, the evaluation, the stall injector and their hooks.
  void build_step();
  /// Each notice once, and those the run's settings call for.
  void collect_notices();

  StepRecord step(int index, bool warmup);
  /// A step with its failures put in context ("forward of warm-up step 0: ..."); false when a stop
  /// request cut it short (the source was cancelled while the step waited for its batch).
  bool guarded_step(int index, bool warmup, std::vector<StepRecord>& into,
                    const Progress& progress);
  /// Inside data_load: the batch taken, put on the device and fed to the executor.
  StepInputs load(StepRecord& record);
  void capture_window(RunResult& result, const Progress& progress);
  /// Warm-up, the executor's preparation, the ranks' barrier and the capture window.
  void run_steps(RunResult& result, const Progress& progress);
  /// --epochs: every epoch's steps, then its evaluation and checkpoint; the capture window where
  /// --capture-at puts it.
  void run_epochs(RunResult& result, const Progress& progress);
  /// --resume: the checkpoint's epochs into `result` (the best and the target among them); returns
  /// the run's time before this session.
  double take_resumed_epochs(RunResult& result);
  /// One epoch's steps from the run's step `step` (advanced past them), opening and closing
  /// `window` where --capture-at puts it; each step's loss into `losses`, and with fp16 its
  /// found-inf flag into `found` (undefined otherwise). Returns the steps done: fewer than
  /// steps_per_epoch() when a stop cut the epoch short.
  std::int64_t train_epoch(std::int64_t& step, CaptureWindow& window, RunResult& result,
                           const Progress& progress, const torch::Tensor& losses,
                           const torch::Tensor& found);
  /// The evaluation after `rec`'s epoch, when --eval-every (or the last epoch) calls for one, into
  /// rec.eval. Returns true when a stop cut it short (rec.eval_cut; the run stops after the
  /// checkpoint). Its failures are named as the evaluation's.
  bool evaluate_epoch(EpochRecord& rec);
  /// The checkpoint directory: locked (rank 0), refused when it holds checkpoints of a run this
  /// one does not continue, and with --resume its newest read and checked.
  void open_checkpoints();
  void check_resumed_fingerprint(const std::string& path);
  void check_capture_window() const;
  // Records the first non-finite loss of `losses` (the losses of steps first_step...; `epoch` -1
  // outside an --epochs run) in `result`, unless one is recorded already. Returns true when the run
  // must stop for it (no --allow-nonfinite-loss). Synchronizes with the device.
  bool note_nonfinite(RunResult& result, const torch::Tensor& losses, std::int64_t first_step,
                      std::int64_t epoch) const;
  // The same for `rec`'s evaluation loss.
  bool note_nonfinite_eval(RunResult& result, const EpochRecord& rec) const;
  // fp16: `rec`'s loss scaling at its epoch's end: the scaler's scale and skipped-step count, and
  // the skipped steps named (the earlier epochs' in `result`, then those whose flag in `found`, one
  // a step from first_step on, is set). Synchronizes with the device.
  void note_loss_scaling(EpochRecord& rec, const torch::Tensor& found, std::int64_t first_step,
                         const RunResult& result) const;
  void note_nonfinite_steps(RunResult& result) const;
  /// Inside `checkpoint`: the state after `epochs_done` epochs with the epochs' records (rank 0
  /// writes; the others only time the range).
  CheckpointRecord write_checkpoint(std::int64_t epochs_done, const std::vector<EpochRecord>& done,
                                    double elapsed_s);
  /// What the distributed watchdog writes when this thread does not come back after an abort: the
  /// report of what is known without this thread (facts copied now), then the process's exit.
  void install_last_resort();

  TrainConfig config_;
  RunOutputs outputs_;
  std::shared_ptr<StopRequest> stop_request_;  // the process's, shared with dist_ and stop_
  torch::Device device_{torch::kCPU};
  std::vector<std::string> notices_;
  std::shared_ptr<const data_pipeline::Food101Index> index_;
  std::int64_t num_classes_ = 101;
  std::optional<StepStream> step_stream_;  // before anything queues device work
  std::unique_ptr<Distributed> dist_;      // declared before ddp_ and stop_: outlives them
  std::unique_ptr<StopControl> stop_;
  ResNet50 model_{nullptr};
  std::optional<LrPlan> lr_plan_;  // train mode: the schedule and its origin, for the report
  std::optional<LrSchedule> lr_schedule_;
  std::unique_ptr<ForeachSgd> optimizer_;
  std::unique_ptr<LossScaler> scaler_;  // --precision fp16 training: the loss scaling
  std::unique_ptr<DataParallel> ddp_;
  std::unique_ptr<InputSource> input_;
  std::unique_ptr<StepExecutor> executor_;
  std::unique_ptr<StallInjector> stalls_;
  PhaseTracker tracker_;  // the step's phases: which one runs, and the stall hook

  // --epochs.
  std::shared_ptr<const data_pipeline::Food101Index> eval_index_;
  std::unique_ptr<Evaluator> evaluator_;
  std::optional<CheckpointDir> checkpoints_;
  // Rank 0's, from the constructor to the end of run(): the one writer of checkpoints_.
  std::optional<CheckpointLock> checkpoint_lock_;
  std::optional<Checkpoint> resume_;  // read in the constructor, dropped once applied
  std::string resume_path_;
  std::int64_t first_epoch_ = 0;
  std::int64_t steps_per_epoch_ = 0;
  nlohmann::ordered_json fingerprint_;
  std::optional<std::int64_t> run_step_;  // the step being run's number in an --epochs run
  EpochProgress epoch_progress_;
};

}  // namespace workload
