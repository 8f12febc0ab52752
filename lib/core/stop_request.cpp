// A process's stop request (lib/core/stop_request.h).
#include "lib/core/stop_request.h"

#include <csignal>

namespace workload {

std::string signal_name(int signal) {
  switch (signal) {
    case 0:
      return "none";
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal " + std::to_string(signal);
  }
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

}  // namespace workload
