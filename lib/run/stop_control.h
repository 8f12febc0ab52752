// Where a run honours its stop requests (lib/core/stop_request.h): at once in a single process, at
// a step boundary every rank agrees on in a data-parallel run.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/core/stop_request.h"
#include "lib/distributed/stop_agreement.h"

namespace workload {

class Distributed;

/// The stop requests of one run and the decision, at each step boundary, to stop there.
///
/// A single process stops at once: request() also runs the cancel hooks (e.g. the input source's
/// cancel, so a step waiting for its batch is cut short). The ranks of a distributed run must not:
/// a step cut short on one rank would leave the others' collectives without a partner. There,
/// request() only records the request; at the next boundary the rank proposes a stop through the
/// store and every rank stops before the step they agreed on (Distributed::agreed_stop).
///
/// In a distributed run each boundary also tells the watchdog that the trainer's thread is making
/// progress (a stop request only aborts the process group when no boundary comes for a while), and
/// a verdict of the watchdog (a lost peer, an abort) ends the run there.
///
/// Thread-safety: request(), requested(), sleep_for() and steps_started() may be called from any
/// thread (request() from a signal-handling one, never from a signal handler itself); the rest from
/// the trainer's thread. Hooks are added before the run starts.
class StopControl {
 public:
  /// `dist`: the run's membership, or nullptr for a single process. Not owned; outlives this.
  /// `request`: the process's stop request (a new one when null), shared with whoever takes the
  /// signals and with `dist`.
  explicit StopControl(Distributed* dist = nullptr, std::shared_ptr<StopRequest> request = nullptr)
      : dist_(dist), request_(request ? std::move(request) : std::make_shared<StopRequest>()) {}
  StopControl(const StopControl&) = delete;
  StopControl& operator=(const StopControl&) = delete;

  /// Called by every request() of a single process (not in a distributed run), on the
  /// requesting thread: must be safe to call from any thread, more than once, and return at once.
  void add_cancel_hook(std::function<void()> hook) { cancel_hooks_.push_back(std::move(hook)); }

  /// Records a stop request with the signal that caused it (0 if none); the first one wins.
  /// Wakes sleep_for(). Returns at once.
  void request(int signal);
  /// The value given to the first request(), or -1 when none was made.
  int requested() const { return request_->requested(); }

  /// At a step boundary, before step `steps_started()`: stop here? A single process stops when a
  /// request was made. A rank of a distributed run proposes its request once, then reads the
  /// ranks' agreement (a `stop_agreement` range in the ddp domain) and stops at the agreed step.
  /// \throws std::runtime_error when this rank is already past the agreed step, or when the
  ///         distributed watchdog has aborted the process group (its verdict's reason).
  bool at_boundary();
  /// Counts a step that ran to its end (warm-up and captured steps together).
  void step_done() { ++next_step_; }
  /// Any thread (the watchdog's last-resort report reads it).
  std::int64_t steps_started() const { return next_step_.load(); }

  /// The signal the run stopped for: this process's request, or in a distributed run the one
  /// another rank stopped for (0 for a request without a signal, -1 when none). Trainer's thread.
  int signal() const;
  /// Distributed runs: who proposed the agreed stop and why ("rank 1: SIGTERM"); empty otherwise.
  std::string agreed_by() const;

  /// Sleeps `duration`, or less when a stop is requested meanwhile (or was before), or the watchdog
  /// interrupts the run. Returns true when it was cut short. Any thread.
  bool sleep_for(std::chrono::duration<double, std::milli> duration) {
    return request_->sleep_for(duration);
  }

 private:
  Distributed* dist_;
  std::shared_ptr<StopRequest> request_;
  std::vector<std::function<void()>> cancel_hooks_;
  std::atomic<std::int64_t> next_step_{0};  // warm-up and captured steps, for the agreement
  bool proposed_ = false;
  std::optional<StopProposal> agreed_;  // the ranks' agreement, once read
};

}  // namespace workload
