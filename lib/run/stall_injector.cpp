// --inject-stall: known host stalls inside named phases of captured steps
// (lib/run/stall_injector.h).
#include "lib/run/stall_injector.h"

#include <algorithm>
#include <string>

#include "lib/core/usage_error.h"
#include "lib/device/cuda_device.h"
#include "lib/instrument/nvtx.h"
#include "lib/step/step_plan.h"

namespace workload {

void check_stalls(const TrainConfig& c) {
  const std::vector<std::string> ranges = step_ranges(c);
  for (const InjectedStall& s : c.inject_stall) {
    if (std::find(ranges.begin(), ranges.end(), s.phase) == ranges.end()) {
      std::string names;
      for (const auto& p : ranges) names += (names.empty() ? "" : ", ") + p;
      throw UsageError("--inject-stall " + to_string(s) +
                       ": PHASE must be one of this run's step ranges (" + names + "), got '" +
                       s.phase + "'");
    }
    if (s.step >= c.steps) {
      throw UsageError("--inject-stall " + to_string(s) + ": STEP must be a captured step, 0 to " +
                       std::to_string(c.steps - 1) + " (--steps " + std::to_string(c.steps) + ")");
    }
  }
}

void StallInjector::begin_step(int index, bool warmup, std::vector<InjectedStall>* made) {
  step_ = index;
  warmup_ = warmup;
  made_ = made;
}

void StallInjector::at(const char* phase) {
  if (warmup_) return;
  for (const InjectedStall& s : stalls_) {
    if (s.step != step_ || s.phase != phase) continue;
    nvtx::StallRange range(nvtx::kInjectStall);
    device_synchronize();
    stop_.sleep_for(std::chrono::duration<double, std::milli>(s.ms));
    if (made_) made_->push_back(s);
  }
}

}  // namespace workload
