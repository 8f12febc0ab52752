// The exception for a mistake in the command line or a setting that cannot run.
#pragma once

#include <stdexcept>
#include <string>

namespace workload {

/// A setting that cannot run, named by its flag ("--steps: expected ..., got ..."). `main` prints
/// it with a --help hint and exits with status 2 (lib/config/flag_table.h, run_main).
class UsageError : public std::invalid_argument {
 public:
  explicit UsageError(const std::string& what) : std::invalid_argument(what) {}
};

}  // namespace workload
