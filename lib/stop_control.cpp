// Stop requests and where a run honours them (lib/stop_control.h).
#include "lib/stop_control.h"

#include <csignal>
#include <optional>
#include <stdexcept>

#include "lib/distributed.h"
#include "lib/nvtx.h"

namespace workload {

std::string signal_name(int signal) {
  switch (signal) {
    case 0:
      return "none";
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "signal " + std::to_string(signal);
  }
}

int signal_number(const std::string& name) {
  if (name == "SIGINT") return SIGINT;
  if (name == "SIGTERM") return SIGTERM;
  if (name.rfind("signal ", 0) == 0) return std::stoi(name.substr(7));
  return 0;
}

void StopRequest::request(int signal) {
  int expected = -1;
  signal_.compare_exchange_strong(expected, signal);
  wake();
}

void StopRequest::interrupt() {
  interrupted_.store(true);
  wake();
}

void StopRequest::wake() {
  {
    // Taken so that a sleeper between its check and its wait cannot miss the notification.
    std::lock_guard<std::mutex> lock(mu_);
  }
  wake_.notify_all();
}

bool StopRequest::sleep_for(std::chrono::duration<double, std::milli> duration) {
  std::unique_lock<std::mutex> lock(mu_);
  return wake_.wait_for(lock, duration, [&] { return signal_.load() >= 0 || interrupted_.load(); });
}

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
    dist_->propose_stop(next_step_, signal_name(requested()));
  }
  nvtx::DdpRange range(nvtx::kStopAgreement);
  const std::optional<std::int64_t> stop = dist_->agreed_stop();
  if (stop && next_step_.load() > *stop) {
    // Ranks drifted further apart than the margin allows: the others will not run this rank's
    // last steps' collectives. Say so rather than wait for them.
    throw std::runtime_error("the ranks agreed to stop before step " + std::to_string(*stop) +
                             " (" + dist_->stop_reason() + "), but this rank had already run " +
                             std::to_string(next_step_.load()) + " steps");
  }
  return stop && next_step_.load() >= *stop;
}

int StopControl::signal() const {
  if (requested() >= 0) return requested();
  if (!dist_) return -1;
  // Another rank's request: "rank 1: SIGTERM".
  const std::string reason = dist_->stop_reason();
  if (reason.empty()) return -1;
  return signal_number(reason.substr(reason.find(": ") + 2));
}

std::string StopControl::agreed_by() const { return dist_ ? dist_->stop_reason() : std::string(); }

}  // namespace workload
