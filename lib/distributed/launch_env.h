// The distributed environment a launcher gives each rank (torchrun's variables), read and checked.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace workload {

/// Where a rank is and how it finds the others, from the variables torchrun sets (and
/// scripts/launch_local.sh sets the same way).
struct LaunchEnv {
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
std::optional<LaunchEnv> read_launch_env(
    const std::function<const char*(const char*)>& getenv = nullptr);

/// The output path of `rank` in a run of several: "run.json" -> "run.rank1.json" (".rank<r>" before
/// the extension, or at the end when there is none). Every rank of a distributed run writes its
/// own report and trace; a single process writes `path` itself.
std::string rank_output_path(const std::string& path, int rank);

}  // namespace workload
