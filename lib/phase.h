// A training-step phase: its NVTX range, a LibTorch profiler scope of the same name (so the Chrome
// trace and the Nsight timeline use one vocabulary), and the record of which phase is running.
#pragma once

#include <ATen/record_function.h>

#include <exception>

#include "lib/nvtx.h"

namespace workload {

/// Opens the NVTX range `name` (default domain) and a RecordFunction user scope `name` (only
/// active while torch::autograd::profiler records; otherwise a flag check), and makes `*current`
/// (when given) name this phase while it runs, for error messages.
///
/// On a normal exit `*current` goes back to the enclosing phase. When the scope is left by an
/// exception it keeps naming the innermost phase the exception went through, so the handler that
/// catches it outside every phase still learns where it happened. `name` must outlive the scope
/// (the vocabulary in lib/nvtx.h does). Neither copyable nor movable; one thread.
class Phase {
 public:
  explicit Phase(const char* name, const char** current = nullptr)
      : range_(name),
        scope_(at::RecordScope::USER_SCOPE),
        current_(current),
        previous_(current ? *current : nullptr),
        exceptions_(std::uncaught_exceptions()) {
    if (scope_.isActive()) scope_.before(name);
    if (current_) *current_ = name;
  }
  ~Phase() {
    if (current_ && std::uncaught_exceptions() == exceptions_) *current_ = previous_;
  }
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;
  Phase(Phase&&) = delete;
  Phase& operator=(Phase&&) = delete;

 private:
  nvtx::Range range_;  // opened first, closed last
  at::RecordFunction scope_;
  const char** current_;
  const char* previous_;
  int exceptions_;
};

}  // namespace workload
