// A training-step phase: its NVTX range, a LibTorch profiler scope of the same name (so the Chrome
// trace and the Nsight timeline use one vocabulary), the record of which phase is running and how
// long it took on the host, and the hook that runs at its start (--inject-stall).
#pragma once

#include <ATen/record_function.h>

#include <chrono>
#include <exception>
#include <functional>
#include <utility>
#include <vector>

#include "lib/instrument/nvtx.h"

namespace workload {

/// The host wall time of each phase a step opened, in the order they opened: (name, ms).
using PhaseTimes = std::vector<std::pair<const char*, double>>;

/// Which phase of a step is running (or failed), for error messages, what runs at the start of
/// each phase, and where the phases' times go. One thread: the one that opens the phases.
struct PhaseTracker {
  const char* current = "";  ///< the innermost phase open, or the one an exception went through
  /// Called with the phase's name just after its range opened (may be empty). What it throws
  /// leaves the phase as an exception inside it would.
  std::function<void(const char*)> on_enter;
  /// Where a phase opened while this is set appends its name and, when it closes (normally or by
  /// an exception), its host wall time; null: no times (two clock reads a phase when set).
  PhaseTimes* times = nullptr;
};

/// Opens the NVTX range `name` (default domain) and a RecordFunction user scope `name` (only
/// active while torch::autograd::profiler records; otherwise a flag check), makes
/// `tracker->current` (when given) name this phase while it runs, and then calls the tracker's
/// `on_enter` hook.
///
/// With `tracker->times` set it records the phase's host wall time there (lib/report's `phase_ms`).
/// On a normal exit `current` goes back to the enclosing phase. When the scope is left by an
/// exception it keeps naming the innermost phase the exception went through, so the handler that
/// catches it outside every phase still learns where it happened. `name` must outlive the scope
/// (the vocabulary in lib/instrument/nvtx.h does). Neither copyable nor movable; one thread.
class Phase {
 public:
  explicit Phase(const char* name, PhaseTracker* tracker = nullptr)
      : range_(name),
        scope_(at::RecordScope::USER_SCOPE),
        tracker_(tracker),
        previous_(tracker ? tracker->current : nullptr),
        exceptions_(std::uncaught_exceptions()) {
    if (scope_.isActive()) scope_.before(name);
    if (!tracker_) return;
    if (tracker_->times) {
      times_ = tracker_->times;
      slot_ = times_->size();
      times_->emplace_back(name, 0.0);
      start_ = std::chrono::steady_clock::now();
    }
    tracker_->current = name;
    if (tracker_->on_enter) tracker_->on_enter(name);
  }
  ~Phase() {
    if (times_) {
      (*times_)[slot_].second =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
              .count();
    }
    if (tracker_ && std::uncaught_exceptions() == exceptions_) tracker_->current = previous_;
  }
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;
  Phase(Phase&&) = delete;
  Phase& operator=(Phase&&) = delete;

 private:
  nvtx::Range range_;  // opened first, closed last
  at::RecordFunction scope_;
  PhaseTracker* tracker_;
  const char* previous_;
  int exceptions_;
  PhaseTimes* times_ = nullptr;  // the step's times, when its tracker records them
  std::size_t slot_ = 0;
  std::chrono::steady_clock::time_point start_;
};

/// Points `tracker.times` at `times` for its scope (a step's phases), then back at nothing. Neither
/// copyable nor movable; the tracker's thread.
class PhaseTiming {
 public:
  PhaseTiming(PhaseTracker& tracker, PhaseTimes& times) : tracker_(tracker) {
    tracker_.times = &times;
  }
  ~PhaseTiming() { tracker_.times = nullptr; }
  PhaseTiming(const PhaseTiming&) = delete;
  PhaseTiming& operator=(const PhaseTiming&) = delete;

 private:
  PhaseTracker& tracker_;
};

}  // namespace workload
