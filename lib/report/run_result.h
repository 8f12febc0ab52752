// What a training run produces: a host-side record per step and the run's totals.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data_pipeline/loader.h"
#include "lib/config/train_config.h"

namespace workload {

/// Host-side facts of one training step (no device values: nothing here synchronizes).
struct StepRecord {
  int index = 0;  ///< 0-based within its phase (warm-up or capture)
  bool warmup = false;
  double batch_wait_ms = 0;  ///< inside batch_wait: blocked on the loader
  double h2d_submit_ms = 0;  ///< inside h2d_submit: issuing the copies
  double step_ms = 0;        ///< the whole torch_step range
  /// Every range the step opened inside torch_step (data_load, batch_wait, h2d_submit, forward,
  /// ...), in the order they opened, with its host wall time in ms (lib/instrument/phase.h).
  std::vector<std::pair<std::string, double>> phase_ms;
  std::uint64_t digest = 0;  ///< digest of the batch's host label and image bytes
  std::int64_t epoch = 0;
  std::int64_t batch_in_epoch = 0;
  std::vector<data_pipeline::SkippedImage> skipped;
  std::optional<double> loss;  ///< read every step only with --sync-every-step
  /// Train mode: the learning rate of this step's optimizer step (lib/model/lr_schedule.h).
  std::optional<double> lr;
  std::vector<InjectedStall> injected_stalls;  ///< --inject-stall sleeps made in this step
  /// --epochs: the step's 0-based number in the run (across epochs and resumes).
  std::optional<std::int64_t> step;
};

/// --epochs: one evaluation pass (lib/run/evaluator.h): fractions of the images, loss per image.
struct EvalRecord {
  std::int64_t images = 0;  ///< Summed over the ranks: every image of the split once.
  double top1 = 0;
  double top5 = 0;
  double loss = 0;  ///< Cross-entropy without label smoothing.
  double ms = 0;    ///< Host wall time of the `eval` range.
  int steps = 0;    ///< This rank's evaluation steps.
  /// The images --on-bad-image skip could not read, this rank's: left out of every count (the
  /// image the loader put in their place is not counted a second time).
  std::vector<std::string> skipped;
};

/// --epochs: the checkpoint written at an epoch's end (rank 0's).
struct CheckpointRecord {
  std::string path;
  std::uint64_t bytes = 0;
  double ms = 0;  ///< Host wall time of the `checkpoint` range (state gathered, written, synced).
};

/// --epochs: what one epoch did.
struct EpochRecord {
  std::int64_t epoch = 0;  ///< 0-based
  std::int64_t steps = 0;
  double train_loss = 0;    ///< Mean of the epoch's step losses (this rank's).
  double train_s = 0;       ///< Its steps, through the read of their loss (which drains them).
  double images_per_s = 0;  ///< This rank's images over train_s, times the ranks.
  double epoch_s = 0;       ///< train_s, the evaluation and the checkpoint.
  double elapsed_s = 0;     ///< The run's wall time at the epoch's end, earlier sessions included.
  double lr = 0;            ///< The LR of the epoch's last step.
  std::optional<EvalRecord> eval;
  std::optional<CheckpointRecord> checkpoint;
  bool resumed = false;  ///< Read from the checkpoint a resumed run started from.
  /// --precision fp16's loss scaling at the epoch's end: the scale, the steps skipped in the run so
  /// far (the scaler's count, resumed sessions included), and which they were (run-wide 0-based
  /// steps, in order; those of epochs resumed from a checkpoint that lacks them are left out).
  /// Unset (and the list empty) for other precisions.
  std::optional<double> loss_scale;
  std::int64_t skipped_steps = 0;
  std::vector<std::int64_t> skipped_at;
  /// A stop (a signal) came during its evaluation: the evaluation was cut short and left out, and
  /// the epoch's training kept (its checkpoint written) before the run stopped.
  bool eval_cut = false;
};

/// What a run produced.
struct RunResult {
  std::vector<StepRecord> warmup_steps;
  std::vector<StepRecord> steps;  ///< captured steps
  double elapsed_s = 0;           ///< capture_window start through the end of capture_drain
  double images_per_s = 0;
  double iterator_reset_ms = 0;
  double capture_drain_ms = 0;
  double profiler_stop_ms = 0;  ///< inside cudaProfilerStop: under nsys, the capture's hand-over
  /// --cuda-graph: the capture after the warm-up (recording, rewriting, instantiating and uploading
  /// the graph; it runs nothing of the step on the device), outside the capture window.
  std::optional<double> graph_capture_ms;
  /// --cuda-graph: the captured memset nodes rewritten into kernel nodes (--cuda-graph-memsets
  /// kernels), and those replayed as memset nodes; both -1 where this build cannot read the graph
  /// before instantiating it (no CUDA compiler, or LibTorch before 2.8).
  int graph_memset_kernels = -1;
  int graph_memset_nodes = -1;
  std::optional<double> loss_after_drain;
  /// The first loss that was not finite, where it was read ("step 17 (epoch 1): loss nan", "the
  /// evaluation after epoch 2: loss inf"), or "" when every loss read was finite.
  std::string nonfinite_loss;
  /// True when the run stopped for nonfinite_loss (not with --allow-nonfinite-loss): its epoch was
  /// neither evaluated nor saved, and the run ends with exit status 1.
  bool nonfinite_stopped = false;
  bool capture_started = false;
  std::string torch_trace;  ///< the Chrome trace written, if one was asked for
  bool interrupted = false;
  std::string interrupt_signal;  ///< With `interrupted`: signal_name() of the stop's signal.
  /// Distributed runs: who asked the ranks to stop and why ("rank 1: SIGTERM"), when they did.
  std::string stop_agreed_by;
  /// Distributed runs: why the watchdog aborted the process group and ended the run here, without
  /// the ranks' agreement ("rank 1 missing: no heartbeat for 5.0 s"); empty when it did not.
  std::string aborted;
  /// With `aborted`: the rank that was lost (dead, frozen, failed, or serving a store that is
  /// gone), or -1 (a stop this rank could not agree on with the others, or torchrun's store).
  int lost_rank = -1;
  /// Distributed runs: digest of every parameter after the drain (equal on every rank when the
  /// replicas are in sync).
  std::optional<std::uint64_t> parameter_digest;

  // --epochs runs.
  std::vector<EpochRecord> epochs;
  /// Steps after the capture window (before it: warmup_steps; in it: steps). Without --capture-at
  /// every step is in `steps`.
  std::vector<StepRecord> steps_after_capture;
  std::string resumed_from;  ///< The checkpoint this run continued from, empty when none.
  /// The best evaluation's top-1 and when it came (epoch, elapsed_s), and whether --target-top1
  /// was reached (the run then stopped at that epoch's end).
  std::optional<double> best_top1;
  std::int64_t best_top1_epoch = -1;
  double time_to_best_top1_s = 0;
  bool target_reached = false;
};

}  // namespace workload
