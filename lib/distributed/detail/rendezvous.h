// One rank's rendezvous: the store reached (or served), every rank joined, the process group
// created, each stage bounded by --dist-timeout-s and its failure the user's error. Internal to
// lib/distributed (c10d).
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "lib/config/train_config.h"
#include "lib/distributed/detail/c10d_store.h"
#include "lib/distributed/detail/group_abort.h"
#include "lib/distributed/launch_env.h"
#include "lib/distributed/watchdog.h"

namespace workload::detail {

/// Where a rendezvous is, for its waiting notices (from the watchdog's thread) and its failure's
/// message (from the trainer's). Thread-safety: every member, from any thread.
class RendezvousProgress {
 public:
  enum class Stage { kConnect, kJoin, kGroup };

  void enter(Stage stage);
  /// The join's facts: the store answered a check, and these ranks had not joined when last looked.
  void record_join(std::vector<int> missing);

  Stage stage() const;
  bool answered() const;
  std::vector<int> missing() const;
  /// What the rank waits for now, for a notice: "the store at 127.0.0.1:29500 (served by rank 0)",
  /// "ranks 2, 3 to join", "the nccl process group to be created".
  std::string waiting_for(const LaunchEnv& env, DistBackend backend) const;

 private:
  mutable std::mutex mu_;
  Stage stage_ = Stage::kConnect;
  bool answered_ = false;
  std::vector<int> missing_;
};

/// Rendezvouses with the other ranks within `timeout`: connects to the store (serving it on rank 0
/// without torchrun's agent), waits for every rank to write its key `joined/<rank>`, then creates
/// the process group of `backend` bound to `device` and hands it to `abort`. `watchdog`'s verdict
/// (a deadline it saw first) shapes the failure's message.
/// \throws UsageError "MASTER_ADDR:MASTER_PORT: rank r of w, store A:P: <what failed>" naming
///         the stage: the store unreachable, not served or silent, the ranks that did not join, or
///         the group that could not be created.
Group rendezvous(const LaunchEnv& env, DistBackend backend, const torch::Device& device,
                 std::chrono::milliseconds timeout, GroupAbort& abort, RendezvousProgress& progress,
                 const DistWatchdog& watchdog);

}  // namespace workload::detail
