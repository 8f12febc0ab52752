// Where a run honours its stop requests (lib/run/stop_control.h).
#include "lib/run/stop_control.h"

#include <optional>
#include <stdexcept>

#include "lib/distributed/distributed.h"
#include "lib/instrument/nvtx.h"

namespace workload {

void StopControl::request(int signal) {
  request_->request(signal);
  if (!dist_) {
    for (const auto& hook : cancel_hooks_) hook();
  }
}

bool StopControl::at_boundary() {
  if (!dist_) return requested() >= 0;
  dist_->boundary();
  if (const std::optional<DistVerdict> verdict = dist_->verdict()) {
    throw std::runtime_error(verdict->reason);
  }
  if (requested() >= 0 && !proposed_) {
    proposed_ = true;
    dist_->propose_stop(next_step_, requested());
  }
  nvtx::DdpRange range(nvtx::kStopAgreement);
  if (!agreed_) agreed_ = dist_->agreed_stop();
  if (agreed_ && next_step_.load() > agreed_->step) {
    // Ranks drifted further apart than the margin allows: the others will not run this rank's
    // last steps' collectives. Say so rather than wait for them.
    throw std::runtime_error("the ranks agreed to stop before step " +
                             std::to_string(agreed_->step) + " (" + describe(*agreed_) +
                             "), but this rank had already run " +
                             std::to_string(next_step_.load()) + " steps");
  }
  return agreed_ && next_step_.load() >= agreed_->step;
}

int StopControl::signal() const {
  if (requested() >= 0) return requested();
  return agreed_ ? agreed_->signal : -1;  // another rank's request
}

std::string StopControl::agreed_by() const { return agreed_ ? describe(*agreed_) : std::string(); }

}  // namespace workload
