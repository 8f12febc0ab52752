// How a run of train_resnet50 ends: its exit status (lib/core/exit_status.h) and the line it
// prints first on stderr, for a run that came back and for a setup a lost peer ended.
#pragma once

#include <string>

#include "lib/distributed/distributed.h"
#include "lib/report/run_result.h"

namespace workload {

/// An exit status and what to print on stderr before returning it ("" for nothing).
struct Outcome {
  int status = 0;
  std::string message;
};

/// A run that came back: 0; 128 + the signal it stopped for (`stop_signal`: this process's, or
/// the one the ranks agreed on); or, when the watchdog ended it on a lost peer without a stop
/// request (`stop_requested` < 0), 3 with "<who>: error: <why>; the run stopped after N steps
/// [; report: <report>]". `who` names the program and its rank ("train_resnet50 (rank 1)").
Outcome run_outcome(const RunResult& result, int stop_requested, int stop_signal,
                    const std::string& who, const std::string& report);

/// A setup that a lost peer ended before the first step: "<who>: error: <why>; the run stopped
/// before its first step", and the verdict's status (lib/distributed/watchdog.h, exit_status_of).
Outcome setup_outcome(const PeerLost& lost, int stop_requested, const std::string& who);

}  // namespace workload
