// The c10d side of lib/distributed shared by its units: the run's store (its prefix and options in
// one place), the heartbeat's operations on it, a rank's process group, and the bytes and messages
// of c10d's API. Included only by lib/distributed's own sources built with c10d
// (WORKLOAD_HAVE_C10D).
#pragma once

#include <torch/types.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "lib/distributed/launch_env.h"
#include "lib/distributed/watchdog.h"

namespace workload::detail {

/// A connection to the rendezvous store at MASTER_ADDR:MASTER_PORT under this run's prefix (as
/// PyTorch's init_process_group keys it: one prefix per torchrun attempt), serving the store when
/// `serve`. Waits for no other rank. Every operation honours `timeout`.
/// \throws what c10d's TCPStore throws when the store cannot be served or reached.
c10::intrusive_ptr<c10d::Store> connect_run_store(const LaunchEnv& env,
                                                  std::chrono::milliseconds timeout, bool serve);

/// The heartbeat's store operations, on a connection of its own (lib/distributed/watchdog.h).
class C10dHeartbeatStore final : public HeartbeatStore {
 public:
  explicit C10dHeartbeatStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  void set_once(const std::string& key, const std::string& value) override;
  std::optional<std::string> get_if_set(const std::string& key) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

/// A rank's membership once the rendezvous is complete: the run's store and the process group,
/// bound to `device`. What Distributed and DataParallel share (Distributed::group()).
struct Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  torch::Device device{torch::kCPU};
};

/// The first line of an exception's message (LibTorch's carry a C++ backtrace after it).
std::string what_of(const std::exception& e);
/// "MASTER_ADDR:MASTER_PORT" of `env`.
std::string endpoint(const LaunchEnv& env);
std::string text_of(const std::vector<std::uint8_t>& bytes);
std::vector<std::uint8_t> bytes_of(const std::string& text);

}  // namespace workload::detail
