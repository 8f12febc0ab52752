// The workload's version string (reported by --version and in the JSON report).
#pragma once

namespace workload {
inline constexpr const char* kWorkloadVersion = "0.1.0";
}  // namespace workload
