// Wall time since a point on the steady clock, in the units the run's records keep (milliseconds
// for phases and steps, seconds for windows and epochs). Header-only; any thread.
#pragma once

#include <chrono>

namespace workload {

using SteadyClock = std::chrono::steady_clock;

inline double ms_since(SteadyClock::time_point start) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

inline double s_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace workload
