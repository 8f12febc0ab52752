// train_resnet50's command line: flags, defaults, help text and validation into a TrainConfig.
#pragma once

#include <string>

#include "lib/train_config.h"

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
/// when one is available (else the CPU).
TrainConfig default_train_config();

/// The CUDA_DEVICE_MAX_CONNECTIONS this command line wants before CUDA starts:
/// kGpuDecodeCudaConnections (32, lib/cuda_device.h) when it asks for the GPU decode stage
/// (`--decode gpu` or `--decode=gpu`, the last one given), else 0 (CUDA's default). nvJPEG's
/// streams hold work that waits for the JPEG engines, and a step stream that shares their hardware
/// queue waits with it. Reads argv without parsing it: parsing starts CUDA (the device default),
/// after which the variable has no effect.
int cuda_connections_for_args(int argc, const char* const* argv);

/// Parses and validates argv against the table of lib/train_flags.h. Booleans accept --flag,
/// --flag=true and --flag=false.
/// \throws UsageError naming the flag for any invalid value or combination, an unknown flag or a
///         missing value (cxxopts' own exceptions for the last two).
ParsedArgs parse_train_args(int argc, const char* const* argv);

}  // namespace workload
