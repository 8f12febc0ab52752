// A training-step phase: its NVTX range plus, when LibTorch's profiler records, a user scope of
// the same name, so the Chrome trace and the Nsight timeline use one vocabulary.
#pragma once

#include <ATen/record_function.h>

#include "lib/nvtx.h"

namespace workload {

/// Opens the NVTX range `name` (default domain) and a RecordFunction user scope `name` (only
/// active while torch::autograd::profiler records; otherwise a flag check). `name` must outlive
/// the scope (the range vocabulary in lib/nvtx.h does). Neither copyable nor movable.
class Phase {
 public:
  explicit Phase(const char* name) : range_(name), scope_(at::RecordScope::USER_SCOPE) {
    if (scope_.isActive()) scope_.before(name);
  }
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;
  Phase(Phase&&) = delete;
  Phase& operator=(Phase&&) = delete;

 private:
  nvtx::Range range_;  // opened first, closed last
  at::RecordFunction scope_;
};

}  // namespace workload
