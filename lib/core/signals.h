// SIGINT, SIGTERM and SIGHUP for a run: a real handler, a watcher thread that turns a signal into
// the process's stop request, and a second signal that ends the process at once.
#pragma once

#include <functional>
#include <memory>

#include "lib/core/stop_request.h"

namespace workload {

/// Takes the process's SIGINT, SIGTERM and SIGHUP (a closed terminal or SSH session: a stop like
/// SIGTERM's, exit 129) for the rest of its life. A process-directed signal goes
/// to any thread that does not block it, and some of those threads are not ours: a profiler's
/// injection library (Nsight Systems preloads one) starts threads before main() with the default
/// mask. So the signals get a real handler, which runs in whichever thread the kernel picks: it
/// records the first signal and wakes the watcher thread through a pipe (both async-signal-safe),
/// and the watcher asks for the stop in ordinary code (`stop`, and the published target); a second
/// signal ends the process at once (128 + the signal). The threads started after this blocks the
/// signals (the mask is inherited), so their system calls are not interrupted; the watcher unblocks
/// them, so there is always a thread of ours to take one.
///
/// Install once per process, from the main thread, before starting other threads. The watcher
/// lives as long as the process. Thread-safety: publish() from the main thread.
class SignalWatcher {
 public:
  /// \throws std::runtime_error when the pipe or the handlers cannot be set up.
  explicit SignalWatcher(std::shared_ptr<StopRequest> stop);

  /// While it lives, a signal also goes to `request_stop` (the run's: Trainer::request_stop),
  /// called from the watcher thread; a signal that came before is passed on at once, from the
  /// constructor's thread. One at a time per process. Neither copyable nor movable.
  class Publication {
   public:
    explicit Publication(std::function<void(int)> request_stop);
    ~Publication();
    Publication(const Publication&) = delete;
    Publication& operator=(const Publication&) = delete;
  };
};

}  // namespace workload
