// A process's stop request (a signal, or the watchdog's interruption), shared by the thread that
// takes the signals, the trainer and the distributed watchdog.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

namespace workload {

/// "SIGINT", "SIGTERM", "signal N", or "none" for 0 (a stop requested without a signal).
std::string signal_name(int signal);

/// The stop request of a process, shared by the thread that takes its signals, the trainer and the
/// distributed watchdog (lib/distributed/watchdog.h), which must see a request before the trainer
/// exists (during the rendezvous) and while the trainer's thread is blocked (in a collective). It
/// also carries the watchdog's interruption: a lost peer ends the run without any signal.
///
/// Thread-safety: every member, from any thread (never from a signal handler itself).
class StopRequest {
 public:
  /// Records a stop request with the signal that caused it (0 if none); the first one wins. Wakes
  /// sleep_for(). Returns at once.
  void request(int signal);
  /// The value given to the first request(), or -1 when none was made.
  int requested() const { return signal_.load(); }
  /// Wakes sleep_for() for good without recording a request: the run is ending for another reason
  /// (a lost peer). Returns at once.
  void interrupt();
  bool interrupted() const { return interrupted_.load(); }
  /// Sleeps `duration`, or less when a request or an interruption comes meanwhile (or came
  /// before). Returns true when it was cut short.
  bool sleep_for(std::chrono::duration<double, std::milli> duration);

 private:
  void wake();

  std::atomic<int> signal_{-1};
  std::atomic<bool> interrupted_{false};
  std::mutex mu_;  // with wake_: sleep_for's wait
  std::condition_variable wake_;
};

}  // namespace workload
