// One rank's membership of a data-parallel run on PyTorch's c10d: the rendezvous, the process
// group, the collectives the trainer calls, the stop agreement and the watchdog. c10d's headers
// stay inside lib/distributed's sources.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/config/train_config.h"
#include "lib/core/stop_request.h"
#include "lib/distributed/launch_env.h"
#include "lib/distributed/stop_agreement.h"
#include "lib/distributed/watchdog.h"

namespace workload {

namespace detail {
struct Group;
class GroupAbort;
class RendezvousProgress;
}  // namespace detail

/// How a rank watches the others while it is in a run (lib/distributed/watchdog.h).
struct DistLiveness {
  /// A peer whose heartbeat (one a second) has not moved for this long, or a store that has not
  /// answered for this long, is missing (--dist-peer-timeout-s).
  std::chrono::milliseconds peer_timeout{5000};
  /// The process's stop request: a signal during the rendezvous ends the process at once, and one
  /// the ranks cannot honour together (this rank blocked in a collective) aborts the process group.
  /// Null: no signals.
  std::shared_ptr<StopRequest> stop;
};

/// A peer was lost (dead, frozen, failed, or its store gone) before the run started.
class PeerLost : public std::runtime_error {
 public:
  explicit PeerLost(DistVerdict verdict)
      : std::runtime_error(verdict.reason), verdict_(std::move(verdict)) {}
  const DistVerdict& verdict() const { return verdict_; }

 private:
  DistVerdict verdict_;
};

/// One rank's membership of a data-parallel run: the rendezvous store (a c10d::TCPStore at
/// MASTER_ADDR:MASTER_PORT, served by torchrun's agent or by rank 0, under the prefixes PyTorch's
/// own init_process_group uses) and the process group of one backend, bound to `device` (the GPU
/// LOCAL_RANK for NCCL). Every collective and store wait honours `timeout`. Its parts, each in its
/// own unit: the rendezvous (lib/distributed/detail/rendezvous.h), the abort that ends every wait
/// (lib/distributed/detail/group_abort.h), the stop agreement's record
/// (lib/distributed/stop_agreement.h) and the watchdog (lib/distributed/watchdog.h).
///
/// Liveness: the watchdog bounds the rendezvous by `timeout` (saying what it waits for after a few
/// seconds, on stdout) and then watches the peers' heartbeats. Its verdict (a peer or the store
/// missing, a stop request the ranks cannot honour together) aborts the group, and a wait of the
/// trainer's thread in a collective or on the store then fails at once. The process ignores SIGPIPE
/// from then on, as Python does (a write to a connection a dead peer closed must fail, not kill the
/// process).
///
/// Thread-safety: the thread that created it, except what says otherwise.
class Distributed {
 public:
  /// Rendezvouses with the other ranks and creates the group, all within `timeout`, then starts the
  /// heartbeat. A stop request (`liveness.stop`) meanwhile ends the process at once (128 + the
  /// signal), saying so.
  /// \throws UsageError for a backend this build lacks or that cannot serve `device`, naming
  ///         MASTER_ADDR when it does not resolve, and naming MASTER_ADDR:MASTER_PORT when the
  ///         store cannot be reached or served, does not answer, or a rank does not join within
  ///         `timeout` (the ranks missing named).
  Distributed(const LaunchEnv& env, DistBackend backend, const torch::Device& device,
              std::chrono::milliseconds timeout, DistLiveness liveness = {});
  /// Stops the watchdog, shuts the group down (PyTorch 2.x, unless aborted) and leaves the store.
  ~Distributed();
  Distributed(const Distributed&) = delete;
  Distributed& operator=(const Distributed&) = delete;

  const LaunchEnv& env() const { return env_; }
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  DistBackend backend() const { return backend_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  std::chrono::milliseconds peer_timeout() const { return peer_timeout_; }

  /// Returns once every rank has called it. \throws on timeout, naming the collective.
  void barrier();
  /// Overwrites `tensors` (on this rank's device) with rank 0's values, coalesced into few
  /// broadcasts as DDP does at construction.
  void broadcast_from_rank0(const std::vector<torch::Tensor>& tensors);

  /// Replaces `tensor` (on this rank's device) with its sum over the ranks, waiting for it (bounded
  /// by the collective timeout). \throws on timeout or a failed collective.
  void all_reduce_sum(torch::Tensor& tensor);

  /// The stop agreement, through the store rather than the device, at step boundaries: this rank,
  /// asked to stop for `signal` (0: without one), proposes to stop before step
  /// `next_step + kStopMargin` (lib/distributed/stop_agreement.h); the first proposal wins.
  void propose_stop(std::int64_t next_step, int signal);
  /// The agreement, read without waiting (nullopt while nobody proposed); once read it stands.
  std::optional<StopProposal> agreed_stop();

  /// The NCCL version the group uses ("2.28.9"), empty without NCCL.
  std::string nccl_version() const;

  /// The watchdog's verdict, once there is one (the group is aborted then). Any thread.
  std::optional<DistVerdict> verdict() const;
  /// After a failure on this thread (a collective that failed, e.g. on a connection a dead peer
  /// closed): waits up to the peer timeout and two heartbeats for the watchdog to say whether a
  /// peer was lost, and returns its verdict (nullopt: the failure is this rank's own).
  std::optional<DistVerdict> await_verdict();
  /// At a step boundary: the trainer's thread makes progress (lock-free).
  void boundary();
  /// This rank fails for `what`: tells the others, who then stop at once naming it. Best effort.
  void announce_failure(const std::string& what);
  /// The trainer's thread is back after a verdict: no last-resort exit follows.
  void stand_down();
  /// The run ended cleanly: stand down, tell the others, and on the rank serving the store wait
  /// (bounded by the peer timeout) until they have ended their runs too.
  void finish();
  /// What the watchdog does when the trainer's thread does not come back after an abort (by
  /// default end_process_on_verdict(): one line on stderr and the exit). Must end the process.
  void set_give_up(std::function<void(const DistVerdict&)> give_up);

  /// The rank's store and process group, for lib/distributed's own units that run collectives
  /// (DataParallel); defined in lib/distributed/detail/c10d_store.h.
  const detail::Group& group() const { return *group_; }

 private:
  LaunchEnv env_;
  DistBackend backend_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds peer_timeout_;
  std::shared_ptr<StopRequest> stop_request_;
  std::unique_ptr<detail::GroupAbort> abort_;
  std::unique_ptr<detail::RendezvousProgress> progress_;
  std::unique_ptr<detail::Group> group_;
  std::optional<StopProposal> agreed_;
  // Last: destroyed first, so that no abort runs while the members above go.
  std::unique_ptr<DistWatchdog> watchdog_;
};

}  // namespace workload
