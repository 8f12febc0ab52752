// Aggregates of a run's captured steps, shared by the report and the printed summary.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lib/report/run_result.h"

namespace workload {

/// Percentile (linear interpolation between closest ranks, numpy's default) of `values`, q in
/// [0, 100]. 0 for an empty list.
double percentile(std::vector<double> values, double q);

/// Aggregates of the captured steps.
struct StepSummary {
  double step_ms_p50 = 0;
  double step_ms_p95 = 0;
  double batch_wait_total_ms = 0;
  double batch_wait_max_ms = 0;
  int batch_wait_max_step = -1;
  double h2d_submit_total_ms = 0;
  int images_skipped = 0;            ///< Replaced images in the captured steps.
  int images_skipped_all_steps = 0;  ///< ... in warm-up and captured steps.
  /// Each phase's host time, the median over the captured steps that opened it, in the order the
  /// first step opened them.
  std::vector<std::pair<std::string, double>> phase_ms_p50;
};
/// Aggregates of `result`'s captured steps (and its skipped images, warm-up included).
StepSummary summarize(const RunResult& result);

}  // namespace workload
