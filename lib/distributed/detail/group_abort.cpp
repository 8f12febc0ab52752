// Ending a rank's waits in c10d (lib/distributed/detail/group_abort.h).
#include "lib/distributed/detail/group_abort.h"

#include <torch/version.h>

#include <stdexcept>

namespace workload::detail {

void GroupAbort::adopt(c10::intrusive_ptr<c10d::ProcessGroup> group,
                       const std::vector<SocketId>& before) {
  std::lock_guard<std::mutex> lock(mu_);
  // The connections the group opened (Gloo's pairs; NCCL's come later, and its abort ends them),
  // less the store's.
  group_sockets_ = new_sockets(before, tcp_sockets(), store_port_);
  group_ = std::move(group);
  if (aborted_) throw std::runtime_error("aborted while the group was created");
}

void GroupAbort::abort() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
#if TORCH_VERSION_MAJOR >= 2
  // NCCL's communicators (ncclCommAbort): kernels waiting for a peer end, and so do host waits on
  // them. Gloo's backend has nothing to abort there; its sockets are shut down below.
  if (group_) {
    try {
      group_->abort();
    } catch (...) {
      // Best effort: the sockets below still end Gloo's and the store's waits.
    }
  }
#endif
  shutdown_sockets(group_sockets_);
  shutdown_connections_to(store_addresses_, store_port_);
  if (stop_) stop_->interrupt();
}

bool GroupAbort::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

}  // namespace workload::detail
