// Data parallelism on PyTorch's c10d: one rank's rendezvous and process group, and DDP's gradient
// synchronisation (c10d::Reducer). c10d's headers stay inside lib/distributed.cpp.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/dist_env.h"
#include "lib/dist_watchdog.h"

namespace workload {

class StopRequest;

/// How a rank watches the others while it is in a run (lib/dist_watchdog.h).
struct DistLiveness {
  /// A peer whose heartbeat (one a second) has not moved for this long, or a store that has not
  /// answered for this long, is missing (--dist-peer-timeout-s).
  std::chrono::milliseconds peer_timeout{5000};
  /// The process's stop request: a signal during the rendezvous ends it at once, and one the ranks
  /// cannot honour together (this rank blocked in a collective) aborts the process group. Null:
  /// no signals.
  std::shared_ptr<StopRequest> stop;
};

/// The rendezvous ended because the process was asked to stop (a signal).
class RendezvousStopped : public std::runtime_error {
 public:
  RendezvousStopped(int signal, const std::string& what)
      : std::runtime_error(what), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
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
/// LOCAL_RANK for NCCL). Every collective and store wait honours `timeout`.
///
/// Liveness: a DistWatchdog (lib/dist_watchdog.h) bounds the rendezvous by `timeout` and then
/// watches the peers' heartbeats. Its verdict (a peer or the store missing, a stop request the
/// ranks cannot honour together) aborts the group: the group's own connections (Gloo's, found when
/// it was created) and this process's store connections are shut down, and on PyTorch 2.x the
/// group's abort() aborts NCCL's communicators; a wait of the trainer's thread in a collective or
/// on the store then fails at once. The process ignores SIGPIPE from then on, as Python does (a
/// write to a connection a dead peer closed must fail, not kill the process).
///
/// Thread-safety: the thread that created it, except what says otherwise.
class Distributed {
 public:
  /// Rendezvouses with the other ranks and creates the group, all within `timeout`: connects to
  /// the store (serving it on rank 0 without torchrun's agent), waits for every rank to join (its
  /// key `joined/<rank>`), creates the group, then starts the heartbeat.
  /// \throws UsageError for a backend this build lacks or that cannot serve `device`, and naming
  ///         MASTER_ADDR:MASTER_PORT when the store cannot be reached or served, does not answer,
  ///         or a rank does not join within `timeout` (the ranks missing named);
  ///         RendezvousStopped when `liveness.stop` is requested meanwhile.
  Distributed(const DistEnv& env, DistBackend backend, const torch::Device& device,
              std::chrono::milliseconds timeout, DistLiveness liveness = {});
  /// Stops the watchdog, shuts the group down (PyTorch 2.x, unless aborted) and leaves the store.
  ~Distributed();
  Distributed(const Distributed&) = delete;
  Distributed& operator=(const Distributed&) = delete;

  const DistEnv& env() const { return env_; }
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  DistBackend backend() const { return backend_; }

  /// Returns once every rank has called it. \throws on timeout, naming the collective.
  void barrier();
  /// Overwrites `tensors` (on this rank's device) with rank 0's values, coalesced into few
  /// broadcasts as DDP does at construction.
  void broadcast_from_rank0(const std::vector<torch::Tensor>& tensors);

  /// The stop agreement, through the store rather than the device, at step boundaries (a step's
  /// number counts warm-up and captured steps together). A rank asked to stop proposes to stop
  /// before step `next_step + kStopMargin`, where `next_step` is the step it is about to start;
  /// the first proposal wins (compare-and-set). `agreed_stop`, called at every boundary, reads the
  /// agreement without waiting (nullopt while nobody proposed). Ranks are never more than a step
  /// or two apart (each step's collectives couple them), so every rank sees the proposal before it
  /// reaches the agreed step, and all of them run exactly the steps before it: no collective is
  /// left without its partners, and no rank waits for another outside a collective.
  static constexpr std::int64_t kStopMargin = 3;
  void propose_stop(std::int64_t next_step, const std::string& reason);
  std::optional<std::int64_t> agreed_stop();
  /// Who proposed the agreed stop and why ("rank 1: SIGTERM"), once there is one.
  std::string stop_reason();

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
  /// default: one line on stderr and the exit with exit_code()). Must end the process.
  void set_give_up(std::function<void(const DistVerdict&)> give_up);
  std::chrono::milliseconds peer_timeout() const { return peer_timeout_; }

  struct Impl;  // the c10d objects (lib/distributed.cpp)
  Impl& impl() { return *impl_; }

 private:
  DistEnv env_;
  DistBackend backend_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds peer_timeout_;
  std::unique_ptr<Impl> impl_;
};

/// The first gradient bucket's size once DDP rebuilds its buckets (Python DDP's 1 MiB).
inline constexpr std::int64_t kFirstBucketBytes = std::int64_t{1} << 20;

/// DistributedDataParallel's gradient synchronisation on c10d's Reducer, as Python's DDP sets it
/// up: the parameters' shapes checked across ranks, parameters and buffers broadcast from rank 0,
/// the first iteration in one bucket, then buckets of `bucket_bytes` (the first 1 MiB) rebuilt in
/// the order gradients became ready; each bucket's all-reduce (the mean over ranks) launched from
/// autograd's hooks while backward still runs. With `broadcast_buffers`, the buffers (BatchNorm's
/// running statistics) are broadcast from rank 0 before each forward, as DDP's default.
///
/// Construct after the model is on its device and in its memory format. One thread.
class DataParallel {
 public:
  /// `gradient_as_bucket_view`: DDP's option of that name (each gradient a view of its bucket
  /// once copied in, so nothing is copied back after the all-reduce).
  DataParallel(Distributed& dist, torch::nn::Module& model, std::int64_t bucket_bytes,
               bool broadcast_buffers, bool gradient_as_bucket_view = false);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  /// Inside the forward phase, before the model runs: rebuilds the buckets after the first
  /// iteration (a collective), broadcasts the buffers, marks the iteration's start.
  void before_forward();
  /// After the model's forward, when a backward follows: arms the reduction of every parameter's
  /// gradient (every parameter takes part in every iteration: no search for unused ones).
  void before_backward();

  /// The training iterations run so far (forwards with a backward to follow).
  std::int64_t iterations() const;
  /// Before the next training iteration is captured into a CUDA graph (lib/graph_step.h): the
  /// Reducer times no iteration with CUDA events from now on (nothing here reads those timings;
  /// Python's DDP logger does), so the captured one records only the step's device work: the
  /// bucket copies and their all-reduces, launched as buckets fill while backward runs, and the
  /// copies back into the gradients. Replays run exactly that; the Reducer's host bookkeeping
  /// runs once, during the capture, and never again.
  /// \throws std::runtime_error when fewer than kDdpGraphWarmup iterations ran eagerly.
  void before_capture();

 private:
  struct State;
  Distributed& dist_;
  std::int64_t bucket_bytes_;
  bool broadcast_buffers_;
  std::vector<torch::Tensor> buffers_;
  std::unique_ptr<State> state_;
};

/// A 64-bit digest of every parameter's bytes, in order (equal on every rank when the replicas are
/// in sync). Copies each to the host: call after the device is drained.
std::uint64_t parameter_digest(const torch::nn::Module& model);

}  // namespace workload
