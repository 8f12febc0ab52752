// The one home of CUDA_DEVICE_MAX_CONNECTIONS: which runs want more hardware queues than CUDA's
// default, the program setting it before CUDA starts, the notice when the user's value is smaller,
// and what the report says of it.
#pragma once

#include <optional>
#include <string>

namespace workload {

/// The environment variable: the number of hardware work queues the process's streams share.
inline constexpr const char* kCudaConnectionsVariable = "CUDA_DEVICE_MAX_CONNECTIONS";

/// The queues a --decode gpu run wants: CUDA's maximum, so that as few of nvJPEG's streams (28,
/// their work waiting for the JPEG engines) as can be share the step's queue. Measured in
/// docs/BENCHMARKS.md: eager bf16 fed by the stage went from 0.95 of its ceiling with CUDA's
/// default (8) to 0.977 with 32, and fell to 0.58 with 1.
inline constexpr int kGpuDecodeCudaConnections = 32;

/// The queues a run wants: kGpuDecodeCudaConnections for the GPU decode stage on a CUDA device,
/// else 0 (CUDA's default will do).
int cuda_connections_for(bool gpu_decode, bool cuda_device);

/// What a train_resnet50 command line wants, read from argv without parsing it (parsing starts CUDA
/// through the device default, after which the variable has no effect): the GPU decode stage's
/// queues when it asks for `--decode gpu` or `--decode=gpu` (the last one given, before any `--`),
/// else 0.
int cuda_connections_for_args(int argc, const char* const* argv);

/// Sets the variable to `connections` unless the environment already has it; `connections` <= 0
/// does nothing. The CUDA driver reads it once, when it initialises: call this before any CUDA
/// call, from the main thread before others start (setenv is not thread-safe). Returns true when it
/// set the variable.
bool default_cuda_connections(int connections);

/// The variable as this process has it, for the report.
struct CudaConnections {
  std::optional<std::string> value;  ///< nullopt when unset (CUDA's default, 8)
  /// "program" when default_cuda_connections() set it, "environment" when the user did; empty when
  /// unset.
  std::string from;
};
/// Any thread, once no thread sets the environment any more.
CudaConnections current_cuda_connections();

/// The notice for a run that wants `wanted` queues (cuda_connections_for) when the environment
/// gives fewer (`found`: the variable's value, nullopt when unset), or "" when it gives enough or
/// nothing is wanted. train_resnet50 sets the variable itself when it is unset, so this is seen
/// when the user set a smaller value.
std::string cuda_connections_notice(int wanted, const std::optional<std::string>& found);

}  // namespace workload
