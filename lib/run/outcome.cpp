// How a run of train_resnet50 ends (lib/run/outcome.h).
#include "lib/run/outcome.h"

#include "lib/core/exit_status.h"

namespace workload {

Outcome run_outcome(const RunResult& result, int stop_requested, int stop_signal,
                    const std::string& who, const std::string& report) {
  if (!result.aborted.empty() && stop_requested < 0) {
    const std::size_t steps = result.warmup_steps.size() + result.steps.size();
    return {exit_status(Ending::kPeerLost),
            who + ": error: " + result.aborted + "; the run stopped after " +
                std::to_string(steps) + " steps" + (report.empty() ? "" : "; report: " + report) +
                "\n"};
  }
  if (result.nonfinite_stopped && !result.interrupted) {
    return {exit_status(Ending::kFailed),
            who + ": error: a loss that is not finite, at " + result.nonfinite_loss +
                "; the run's figures are no result (--allow-nonfinite-loss to go on)" +
                (report.empty() ? "" : "; report: " + report) + "\n"};
  }
  Outcome out;
  if (!result.aborted.empty()) out.message = who + ": " + result.aborted + "\n";
  out.status = result.interrupted ? exit_status(Ending::kStopped, stop_signal)
                                  : exit_status(Ending::kCompleted);
  return out;
}

Outcome setup_outcome(const PeerLost& lost, int stop_requested, const std::string& who) {
  return {exit_status_of(lost.verdict(), stop_requested),
          who + ": error: " + lost.what() + "; the run stopped before its first step\n"};
}

}  // namespace workload
