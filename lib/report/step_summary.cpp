// Aggregates of a run's captured steps (lib/report/step_summary.h).
#include "lib/report/step_summary.h"

#include <algorithm>
#include <cmath>

namespace workload {

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double pos = q / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (pos - static_cast<double>(lo));
}

namespace {
int count_skipped(const std::vector<StepRecord>& steps) {
  int n = 0;
  for (const auto& r : steps) n += static_cast<int>(r.skipped.size());
  return n;
}
}  // namespace

StepSummary summarize(const RunResult& result) {
  StepSummary s;
  std::vector<double> times;
  for (const auto& r : result.steps) {
    times.push_back(r.step_ms);
    s.batch_wait_total_ms += r.batch_wait_ms;
    s.h2d_submit_total_ms += r.h2d_submit_ms;
    if (r.batch_wait_ms > s.batch_wait_max_ms || s.batch_wait_max_step < 0) {
      s.batch_wait_max_ms = r.batch_wait_ms;
      s.batch_wait_max_step = r.index;
    }
  }
  std::vector<std::pair<std::string, std::vector<double>>> phases;
  for (const auto& r : result.steps) {
    for (const auto& [name, ms] : r.phase_ms) {
      auto it = std::find_if(phases.begin(), phases.end(),
                             [&name = name](const auto& p) { return p.first == name; });
      if (it == phases.end()) it = phases.insert(phases.end(), {name, {}});
      it->second.push_back(ms);
    }
  }
  for (const auto& [name, values] : phases)
    s.phase_ms_p50.emplace_back(name, percentile(values, 50));
  s.step_ms_p50 = percentile(times, 50);
  s.step_ms_p95 = percentile(times, 95);
  s.images_skipped = count_skipped(result.steps);
  s.images_skipped_all_steps = s.images_skipped + count_skipped(result.warmup_steps);
  return s;
}

}  // namespace workload
