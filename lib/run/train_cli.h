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
/// learning-rate schedule (run_lr_schedule).
/// \throws UsageError naming the flag.
void validate_run(const TrainConfig& config);

/// The optimizer steps of `config`'s run, the span of its learning-rate schedule: every warm-up
/// and captured step (--warmup + --steps), or with --epochs every epoch's `steps_per_epoch`.
std::int64_t run_optimizer_steps(const TrainConfig& config, std::int64_t steps_per_epoch = 0);

/// The learning-rate schedule of `config`'s run at `world_size` ranks (resolve_lr_schedule,
/// lib/model/lr_schedule.h: the global batch is --batch-size x world_size); an --epochs run's
/// needs its `steps_per_epoch` (the Trainer's, from the split's size).
/// \throws UsageError naming the flag.
RunLrSchedule run_lr_schedule(const TrainConfig& config, int world_size,
                              std::int64_t steps_per_epoch = 0);

/// Parses and validates argv against the table of lib/config/train_flags.h. Booleans accept
/// --flag, --flag=true and --flag=false (also 1/0, yes/no, on/off), --help, --version and
/// --print-config included.
/// \throws UsageError naming the flag for any invalid value or combination, an unknown flag or a
///         missing value.
ParsedArgs parse_train_args(int argc, const char* const* argv);

}  // namespace workload
