// SIGINT, SIGTERM and SIGHUP for a run: a real handler, a watcher thread that turns a signal into
// the process's stop request, and a second signal that ends the process at once.
#pragma once

#include <functional>
#include <memory>

#include "lib/core/stop_request.h"

namespace workload {

/// Takes the process's SIGINT, SIGTERM and SIGHUP (a closed terminal or SSH session: a stop like
/// SIGTERM's, exit 129) for the rest of its life. The calling thread blocks them, and so does every
/// thread started after it (the mask is inherited), so their system calls are not interrupted. A
/// process-directed signal that no thread can take waits for the watcher thread, which reads it
/// from a signalfd and asks for the stop in ordinary code (`stop`, and the published target). Some
/// threads are not ours and do not block them: a profiler's injection library (Nsight Systems
/// preloads one) starts threads before main() with the default mask. So the signals also get a
/// real handler, which runs in such a thread: it records the signal and wakes the watcher through
/// a pipe (both async-signal-safe). A second signal, whichever way it comes, ends the process at
/// once (128 + the signal).
///
/// Install once per process, from the main thread, before starting other threads. The watcher
/// lives as long as the process. Thread-safety: publish() from the main thread.
class SignalWatcher {
 public:
  /// \throws std::runtime_error when the pipe, the signalfd or the handlers cannot be set up.
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
