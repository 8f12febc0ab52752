// The learning rate of each optimizer step: a linear warm-up, then constant, cosine or step decay,
// and the rules that give a run its schedule when the flags leave it open. Light: no LibTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "lib/config/train_config.h"

namespace workload {

/// The linear scaling rule's reference point (Goyal et al., "Accurate, Large Minibatch SGD", 2017):
/// a peak of 0.1 at a global batch of 256 images, proportionally more or less for larger or smaller
/// batches.
inline constexpr double kReferenceLr = 0.1;
inline constexpr std::int64_t kReferenceBatch = 256;

// The defaults, chosen by measurement (docs/BENCHMARKS.md, "The learning rate's defaults"): on
// food101_synth --per-class 160, batch 128, 400 steps, the scaled peak 0.05 collapses to ln(101)
// with a 5% warm-up and learns with 15% or 25% (and so at bf16); step decay learns less than the
// cosine. --help's text of --lr-warmup-steps and --lr-schedule and docs/flags.md repeat them.
/// The warm-up of cosine and step decay without --lr-warmup-steps: this share of the run's
/// optimizer steps, rounded, at least 1.
inline constexpr double kDefaultWarmupShare = 0.25;
/// Step decay: the LR multiplied by kStepDecayFactor at each of these shares of the steps after
/// the warm-up (ResNet's decays at epochs 30, 60 and 80 of 90).
inline constexpr double kStepDecayFactor = 0.1;
inline constexpr double kStepDecayShares[] = {30.0 / 90.0, 60.0 / 90.0, 80.0 / 90.0};

/// A schedule's parameters. Steps are 0-based optimizer steps; T = total_steps, W = warmup_steps.
struct LrScheduleOptions {
  LrScheduleKind kind = LrScheduleKind::kCosine;
  double peak_lr = kReferenceLr;  ///< >= 0
  std::int64_t warmup_steps = 0;  ///< W, in [0, T]; 0 and 1 are both no warm-up in effect
  std::int64_t total_steps = 1;   ///< T >= 1: every optimizer step of the run, warm-up included
  /// kCosine: the floor the cosine falls to, as a fraction of the peak, in [0, 1].
  double final_fraction = 0;
  /// kStep: the steps at which the LR is multiplied by decay_factor, non-decreasing, in [W, T) (a
  /// step named twice decays twice).
  std::vector<std::int64_t> milestones;
  double decay_factor = kStepDecayFactor;  ///< kStep: in (0, 1]
};

/// The learning rate of each optimizer step s (0-based), with P = peak_lr:
///
///   s < W                  P * (s + 1) / W              linear warm-up, reaching P at s = W - 1
///   W <= s < T, constant   P
///   W <= s < T, cosine     F + (P - F) * (1 + cos(pi * (s - W) / (T - W))) / 2,  F = P * final
///                          (P at s = W, falling towards F, which step T would reach)
///   W <= s < T, step       P * decay_factor ^ (the number of milestones <= s)
///   s >= T                 the LR of step T - 1 (a run that goes on keeps its last LR)
///
/// A value: copyable, every member const, any thread.
class LrSchedule {
 public:
  /// \throws std::invalid_argument naming the flag that sets the bad parameter ("--lr-warmup-steps:
  ///         expected an integer in [0, 11] (the run's optimizer steps), got 12").
  explicit LrSchedule(LrScheduleOptions options);

  /// The LR of optimizer step `step`. \throws std::out_of_range for a negative step.
  double lr_at(std::int64_t step) const;
  /// Whether every step's LR is the peak: kConstant without a warm-up (W <= 1). The optimizer then
  /// keeps the article's step, with the LR a scalar of its kernels (lib/model/foreach_sgd.h).
  bool constant() const;
  const LrScheduleOptions& options() const { return options_; }

 private:
  LrScheduleOptions options_;
};

/// The linear scaling rule: kReferenceLr * global_batch / kReferenceBatch.
double scaled_lr(std::int64_t global_batch);
/// The warm-up of a `kind` schedule over `total_steps` without --lr-warmup-steps: none for
/// kConstant, else kDefaultWarmupShare of the steps, rounded, at least 1 and at most total_steps.
std::int64_t default_lr_warmup_steps(LrScheduleKind kind, std::int64_t total_steps);
/// Step decay's milestones: W + floor(share * (T - W)) for each of kStepDecayShares (none when
/// every step is a warm-up step).
std::vector<std::int64_t> default_lr_milestones(std::int64_t warmup_steps,
                                                std::int64_t total_steps);

/// A run's schedule and where its peak came from, for the report.
struct LrPlan {
  LrScheduleOptions options;
  bool scaled = false;            ///< The peak is the scaling rule's (no --lr was given).
  std::int64_t global_batch = 0;  ///< Images per optimizer step over every rank.
  /// The optimizer reads the LR from a table on the device (a --cuda-graph run whose schedule is
  /// not constant); false: a scalar of its kernels (lib/model/foreach_sgd.h).
  bool lr_on_device = false;
};

/// The optimizer steps of `config`'s run, the span of its learning-rate schedule: every warm-up
/// and captured step (--warmup + --steps), or with --epochs every epoch's `steps_per_epoch`.
std::int64_t run_optimizer_steps(const TrainConfig& config, std::int64_t steps_per_epoch = 0);

/// The learning-rate schedule of `config`'s run at `world_size` ranks, the one place its numbers
/// are decided: --lr-schedule; the peak --lr, or scaled_lr() of the global batch (--batch-size x
/// world_size) without it; --lr-warmup-steps, or default_lr_warmup_steps(); the cosine's floor 0;
/// step decay's default_lr_milestones() and kStepDecayFactor; over run_optimizer_steps() (an
/// --epochs run's needs its `steps_per_epoch`, known once its split is read).
/// \throws UsageError naming the flag when the schedule is invalid (LrSchedule's checks).
LrPlan plan_lr(const TrainConfig& config, int world_size, std::int64_t steps_per_epoch = 0);

}  // namespace workload
