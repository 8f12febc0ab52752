// The distributed environment a launcher gives each rank (torchrun's variables), read and checked.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "data_pipeline/named_enum.h"

namespace workload {

using data_pipeline::to_string;

/// Where a rank is and how it finds the others, from the variables torchrun sets (and
/// scripts/launch_local.sh sets the same way).
struct DistEnv {
  int rank = 0;              ///< RANK: 0 .. world_size - 1.
  int world_size = 1;        ///< WORLD_SIZE.
  int local_rank = 0;        ///< LOCAL_RANK: the rank on this node, and so its GPU.
  int local_world_size = 1;  ///< LOCAL_WORLD_SIZE (1 when unset).
  std::string master_addr;   ///< MASTER_ADDR: the rendezvous store's host.
  int master_port = 0;       ///< MASTER_PORT: its port.
  /// TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent already serves the store at
  /// MASTER_ADDR:MASTER_PORT and every rank is a client; otherwise rank 0 serves it.
  bool agent_store = false;
  int restart_count = 0;  ///< TORCHELASTIC_RESTART_COUNT (0 when unset): keys the store's prefix.
};

/// Reads the distributed environment through `getenv` (the process's by default). Returns nullopt
/// when none of RANK, WORLD_SIZE and LOCAL_RANK is set: a single process, as today.
/// \throws UsageError naming the variable when the set is incomplete or a value is out of range
///         (WORLD_SIZE without RANK, a rank >= WORLD_SIZE, a port outside 1..65535, ...).
std::optional<DistEnv> read_dist_env(
    const std::function<const char*(const char*)>& getenv = nullptr);

/// The eager DDP iterations a CUDA graph of the step needs before its capture: the Reducer rebuilds
/// its buckets after the first and times its first 10 with CUDA events, and PyTorch's notes on
/// CUDA graphs ask for 11 ("Usage with DistributedDataParallel"). --warmup's default with
/// --cuda-graph.
inline constexpr int kDdpGraphWarmup = 11;

/// The collective backends of c10d this program can use.
enum class DistBackend {
  kNccl,  ///< GPUs (ProcessGroupNCCL).
  kGloo,  ///< CPUs (ProcessGroupGloo).
};
inline constexpr data_pipeline::EnumName<DistBackend> kDistBackendNames[] = {
    {DistBackend::kNccl, "nccl"}, {DistBackend::kGloo, "gloo"}};
constexpr const auto& enum_names(DistBackend) { return kDistBackendNames; }

/// True when this build carries `backend` (NCCL needs a CUDA LibTorch and NCCL's headers, Gloo
/// Gloo's headers; CMake says which it found).
bool dist_backend_available(DistBackend backend);

/// The report path of `rank` in a run of several: "run.json" -> "run.rank1.json" (".rank<r>" before
/// the extension, or at the end when there is none). Every rank of a distributed run writes its
/// own; a single process writes `path` itself.
std::string rank_report_path(const std::string& path, int rank);

}  // namespace workload
