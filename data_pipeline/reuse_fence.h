// The reuse fence: how the holder of a buffer the device may still read tells the buffer's owner
// when it can be written again (the loader's ring, the GPU stage's output pool).
#pragma once

#include <functional>
#include <vector>

namespace data_pipeline {

/// Blocks until the device no longer reads a released buffer (e.g. a CUDA event synchronize).
/// Called by the buffer's owner on the thread that next writes the buffer, outside the owner's
/// lock, before it writes; or by the owner's destructor for buffers never written again. May
/// throw: the owner fails what it was writing (BatchRing: the next batch in that slot).
using ReuseFence = std::function<void()>;

/// The teardown of an owner whose released buffers the device may still read: waits the fence
/// each of `slots` kept (a `ReuseFence fence` member, empty when none) before the caller frees
/// their memory. A fence that throws is passed over: nothing is left to report to, and the memory
/// is freed after a failed wait as on any teardown error.
template <typename Slot>
void wait_released_fences(std::vector<Slot>& slots) noexcept {
  for (Slot& slot : slots) {
    if (!slot.fence) continue;
    try {
      slot.fence();
    } catch (...) {
    }
  }
}

}  // namespace data_pipeline
