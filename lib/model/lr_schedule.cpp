// The learning rate of each optimizer step (lib/model/lr_schedule.h).
#include "lib/model/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "lib/config/flag_table.h"
#include "lib/core/usage_error.h"

namespace workload {

namespace {

constexpr double kPi = 3.14159265358979323846;

std::string number(double v) { return shortest_text(v); }

void check(const LrScheduleOptions& o) {
  const std::string kind = std::string("--lr-schedule ") + to_string(o.kind);
  if (!std::isfinite(o.peak_lr) || o.peak_lr < 0) {
    throw std::invalid_argument("--lr: expected a number >= 0, got " + number(o.peak_lr));
  }
  if (o.total_steps < 1) {
    throw std::invalid_argument(
        "--steps: a learning-rate schedule needs a run of at least 1 optimizer step, got " +
        std::to_string(o.total_steps));
  }
  if (o.warmup_steps < 0 || o.warmup_steps > o.total_steps) {
    throw std::invalid_argument(
        "--lr-warmup-steps: expected an integer in [0, " + std::to_string(o.total_steps) +
        "] (the run's optimizer steps), got " + std::to_string(o.warmup_steps));
  }
  if (!(o.final_fraction >= 0 && o.final_fraction <= 1)) {
    throw std::invalid_argument(kind + ": expected a final fraction of the peak in [0, 1], got " +
                                number(o.final_fraction));
  }
  if (o.kind != LrScheduleKind::kStep) return;
  if (!(o.decay_factor > 0 && o.decay_factor <= 1)) {
    throw std::invalid_argument(kind + ": expected a decay factor in (0, 1], got " +
                                number(o.decay_factor));
  }
  std::int64_t previous = o.warmup_steps;
  for (const std::int64_t m : o.milestones) {
    if (m < previous || m >= o.total_steps) {
      throw std::invalid_argument(kind + ": expected milestones non-decreasing in [" +
                                  std::to_string(o.warmup_steps) + ", " +
                                  std::to_string(o.total_steps) + "), got " + std::to_string(m));
    }
    previous = m;
  }
}

}  // namespace

LrSchedule::LrSchedule(LrScheduleOptions options) : options_(std::move(options)) {
  check(options_);
}

double LrSchedule::lr_at(std::int64_t step) const {
  if (step < 0) throw std::out_of_range("LrSchedule: step " + std::to_string(step) + " < 0");
  const LrScheduleOptions& o = options_;
  const std::int64_t s = std::min(step, o.total_steps - 1);
  const double peak = o.peak_lr;
  if (s < o.warmup_steps) {
    return peak * static_cast<double>(s + 1) / static_cast<double>(o.warmup_steps);
  }
  switch (o.kind) {
    case LrScheduleKind::kConstant:
      return peak;
    case LrScheduleKind::kCosine: {
      const double floor = peak * o.final_fraction;
      const double progress = static_cast<double>(s - o.warmup_steps) /
                              static_cast<double>(o.total_steps - o.warmup_steps);
      return floor + (peak - floor) * (1 + std::cos(kPi * progress)) / 2;
    }
    case LrScheduleKind::kStep: {
      const auto decays = std::count_if(o.milestones.begin(), o.milestones.end(),
                                        [s](std::int64_t m) { return m <= s; });
      return peak * std::pow(o.decay_factor, static_cast<double>(decays));
    }
  }
  throw std::logic_error("LrSchedule: unknown kind");
}

bool LrSchedule::constant() const {
  return options_.kind == LrScheduleKind::kConstant && options_.warmup_steps <= 1;
}

double scaled_lr(std::int64_t global_batch) {
  return kReferenceLr * static_cast<double>(global_batch) / static_cast<double>(kReferenceBatch);
}

std::int64_t default_lr_warmup_steps(LrScheduleKind kind, std::int64_t total_steps) {
  if (kind == LrScheduleKind::kConstant || total_steps < 1) return 0;
  const std::int64_t share = std::llround(kDefaultWarmupShare * static_cast<double>(total_steps));
  return std::clamp<std::int64_t>(share, 1, total_steps);
}

std::vector<std::int64_t> default_lr_milestones(std::int64_t warmup_steps,
                                                std::int64_t total_steps) {
  std::vector<std::int64_t> out;
  if (total_steps <= warmup_steps) return out;  // no step after the warm-up to decay
  const double after = static_cast<double>(total_steps - warmup_steps);
  for (const double share : kStepDecayShares) {
    out.push_back(warmup_steps + static_cast<std::int64_t>(std::floor(share * after)));
  }
  return out;
}

std::int64_t run_optimizer_steps(const TrainConfig& config, std::int64_t steps_per_epoch) {
  if (config.epochs > 0) return static_cast<std::int64_t>(config.epochs) * steps_per_epoch;
  return static_cast<std::int64_t>(config.warmup) + config.steps;
}

LrPlan plan_lr(const TrainConfig& config, int world_size, std::int64_t steps_per_epoch) {
  LrPlan plan;
  plan.global_batch = static_cast<std::int64_t>(config.loader.batch_size) * world_size;
  plan.scaled = !config.lr.has_value();
  LrScheduleOptions& o = plan.options;
  o.kind = config.lr_schedule;
  o.peak_lr = config.lr ? *config.lr : scaled_lr(plan.global_batch);
  o.total_steps = run_optimizer_steps(config, steps_per_epoch);
  o.warmup_steps = config.lr_warmup_steps ? *config.lr_warmup_steps
                                          : default_lr_warmup_steps(o.kind, o.total_steps);
  if (o.kind == LrScheduleKind::kStep) {
    o.milestones = default_lr_milestones(o.warmup_steps, o.total_steps);
  }
  try {
    (void)LrSchedule{o};  // the checks, naming the flags
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return plan;
}

}  // namespace workload
