// --inject-stall: known host stalls inside named phases of captured steps.
#pragma once

#include <vector>

#include "lib/config/train_config.h"
#include "lib/run/stop_control.h"

namespace workload {

/// Checks that each --inject-stall of `config` names a range its captured steps open (the step's
/// plan, lib/step/step_plan.h) and a captured step. \throws UsageError naming the stall.
void check_stalls(const TrainConfig& config);

/// Makes the stalls of --inject-stall: at the start of phase P of captured step S it drains the
/// device (the host may run steps ahead of it) and sleeps, inside an `inject_stall` range of its
/// own NVTX domain, so the device idles for the sleep's length. A stop request cuts the sleep
/// short. Installed as a PhaseTracker's hook (lib/instrument/phase.h). One thread: the trainer's.
class StallInjector {
 public:
  /// `stop` outlives this.
  StallInjector(std::vector<InjectedStall> stalls, StopControl& stop)
      : stalls_(std::move(stalls)), stop_(stop) {}

  /// The step about to run; the stalls made in it are appended to `made` (nullptr: none yet).
  /// Warm-up steps never stall.
  void begin_step(int index, bool warmup, std::vector<InjectedStall>* made);
  /// At the start of phase `phase` of the current step.
  /// \throws what draining the device throws.
  void at(const char* phase);

 private:
  std::vector<InjectedStall> stalls_;
  StopControl& stop_;
  int step_ = -1;
  bool warmup_ = true;
  std::vector<InjectedStall>* made_ = nullptr;
};

}  // namespace workload
