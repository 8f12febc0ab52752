// train_resnet50's command line: flags, defaults, help text and validation into a TrainConfig.
#pragma once

#include <cstdint>
#include <string>

#include "lib/config/train_config.h"
#include "lib/model/lr_schedule.h"

namespace workload {

/// The outcome of parsing: a config to run, or a request for help, the version or the resolved
/// configuration.
struct ParsedArgs {
  TrainConfig config;
  bool help = false;
  bool version = false;
  /// --print-config: print `config` (validated) as the report's `config` JSON object and exit.
  bool print_config = false;
  std::string help_text;
};

/// TrainConfig's defaults on this machine: min(8, hardware threads) workers, and the CUDA device
/// when one is available (else the CPU), with the collective backend that goes with it.
TrainConfig default_train_config();

/// Every check of a configuration before it runs, the one entry point of the parser and the
/// Trainer alike: validate() (lib/config/train_config.h: flags, combinations, machine, build,
/// output paths), what needs the step's plan (check_stalls, lib/run/stall_injector.h) and the
/// learning-rate schedule (plan_lr, lib/model/lr_schedule.h), and that no output replaces a file of
/// the dataset or the checkpoint directory.
/// \throws UsageError naming the flag.
void validate_run(const TrainConfig& config);

/// Parses and validates argv against the table of lib/config/train_flags.h. Booleans accept
/// --flag, --flag=true and --flag=false (also 1/0, yes/no, on/off), --help, --version and
/// --print-config included.
/// \throws UsageError naming the flag for any invalid value or combination, an unknown flag or a
///         missing value.
ParsedArgs parse_train_args(int argc, const char* const* argv);

}  // namespace workload
