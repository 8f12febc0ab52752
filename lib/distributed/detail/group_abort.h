// How a rank's waits in c10d end on the watchdog's verdict: the process group aborted and this
// process's connections of the group and of the store shut down. Internal to lib/distributed
// (c10d).
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lib/core/stop_request.h"
#include "lib/distributed/detail/sockets.h"

namespace workload::detail {

/// Ends every wait of a rank's process group and store at once. c10d's TCPStore and Gloo have no
/// abort of their own (LibTorch 1.13), so their connections are shut down (lib/distributed/detail/
/// sockets.h): the group's own, found when it was created, and every connection to the store; on
/// PyTorch 2.x the group's abort() aborts NCCL's communicators, ending kernels and host waits on a
/// lost peer. The process's stop request is interrupted too, so a sleep of the run ends.
///
/// Thread-safety: abort() from the watchdog's thread while the trainer's thread may still be
/// creating the group (adopt()); every member is safe from any thread.
class GroupAbort {
 public:
  /// `store_addresses`: MASTER_ADDR resolved (lib/distributed/detail/sockets.h, resolve()); `stop`:
  /// the process's stop request, or null.
  GroupAbort(std::vector<std::string> store_addresses, int store_port,
             std::shared_ptr<StopRequest> stop)
      : store_addresses_(std::move(store_addresses)),
        store_port_(store_port),
        stop_(std::move(stop)) {}

  /// The group once created, with the connections it opened meanwhile (`before`: this process's
  /// sockets before it was created). \throws std::runtime_error when the abort came first.
  void adopt(c10::intrusive_ptr<c10d::ProcessGroup> group, const std::vector<SocketId>& before);
  /// Ends every wait of the group and the store. Best effort; never throws. Idempotent.
  void abort();
  bool aborted() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::string> store_addresses_;
  int store_port_;
  std::shared_ptr<StopRequest> stop_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;  // once created
  std::vector<SocketId> group_sockets_;           // the group's own connections (Gloo's)
  bool aborted_ = false;
};

}  // namespace workload::detail
