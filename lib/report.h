// The run's JSON report and the end-of-run summary table.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "lib/dist_watchdog.h"
#include "lib/trainer.h"

namespace workload {

/// Percentile (linear interpolation between closest ranks, numpy's default) of `values`, q in
/// [0, 100]. 0 for an empty list.
double percentile(std::vector<double> values, double q);

/// Aggregates of the captured steps, shared by the report and the printed summary.
struct StepSummary {
  double step_ms_p50 = 0;
  double step_ms_p95 = 0;
  double batch_wait_total_ms = 0;
  double batch_wait_max_ms = 0;
  int batch_wait_max_step = -1;
  double h2d_submit_total_ms = 0;
  int images_skipped = 0;            ///< Replaced images in the captured steps.
  int images_skipped_all_steps = 0;  ///< ... in warm-up and captured steps.
};
/// Aggregates of `result`'s captured steps (and its skipped images, warm-up included).
StepSummary summarize(const RunResult& result);

/// The resolved configuration as the report's `config` object: one key per flag of
/// lib/train_flags.h, named as the flag with '_' for '-'.
nlohmann::ordered_json config_json(const TrainConfig& config);

/// The full report: config, environment, model, capture, steps, summary, loss, interruption.
nlohmann::ordered_json make_report(const Trainer& trainer, const RunResult& result);

/// The report the distributed watchdog writes when the trainer's thread does not come back after an
/// abort (DistWatchdog's give-up): only what is known without that thread (the configuration, the
/// rank, the verdict, the steps completed), marked "partial". Safe from any thread: it reads its
/// arguments only.
nlohmann::ordered_json make_last_resort_report(const TrainConfig& config, const DistEnv& env,
                                               const DistVerdict& verdict, std::int64_t steps_done,
                                               int signal);

/// Writes `report` to `path` atomically (temporary file, then rename).
/// \throws std::runtime_error naming the path when it cannot be written.
void write_report(const std::string& path, const nlohmann::ordered_json& report);

/// The human-readable summary printed at the end of a run.
std::string format_summary(const Trainer& trainer, const RunResult& result);

/// "0x" followed by 16 lower-case hex digits.
std::string hex64(std::uint64_t v);

}  // namespace workload
