// One rank's membership of a data-parallel run (lib/distributed/distributed.h), for builds with
// c10d (lib/distributed/no_c10d.cpp stands in without it), across the two LibTorch lines this
// project builds against (1.13: the backend is the group; 2.x: a ProcessGroup dispatching to
// backends).
#include "lib/distributed/distributed.h"

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/comm.hpp>

#include <csignal>
#include <cstdio>

#include "lib/core/build_features.h"
#include "lib/core/usage_error.h"
#include "lib/distributed/detail/c10d_store.h"
#include "lib/distributed/detail/group_abort.h"
#include "lib/distributed/detail/rendezvous.h"
#include "lib/distributed/detail/sockets.h"

#if defined(WORKLOAD_HAVE_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace workload {

namespace {

// DDP broadcasts module states in coalesced buffers of 250 MiB (its broadcast_bucket_size).
constexpr std::size_t kBroadcastBucketBytes = std::size_t{250} << 20;
// The store key of the stop agreement (a StopProposal).
constexpr const char* kStopKey = "stop";
// The rendezvous's deadline leaves the trainer's own checks (the join's) a second to report first.
constexpr std::chrono::milliseconds kDeadlineSlack{1000};
// The heartbeat's period (lib/distributed/watchdog.h).
constexpr std::chrono::milliseconds kBeat{1000};

void check_backend(DistBackend backend, const torch::Device& device) {
  require_built(backend == DistBackend::kNccl ? Feature::kNccl : Feature::kGloo,
                std::string("--dist-backend ") + to_string(backend),
                std::string(to_string(backend)) + " backend");
  if (backend == DistBackend::kNccl && !device.is_cuda()) {
    throw UsageError(
        "--dist-backend nccl: NCCL runs on GPUs, and this run's device is the CPU; "
        "use --dist-backend gloo with --device cpu");
  }
}

std::vector<std::string> resolved_store(const LaunchEnv& env) {
  std::vector<std::string> addresses = detail::resolve(env.master_addr);
  if (addresses.empty()) {
    throw UsageError("MASTER_ADDR: '" + env.master_addr +
                     "' does not resolve to an address (rank " + std::to_string(env.rank) + " of " +
                     std::to_string(env.world_size) + "); expected the rendezvous store's host");
  }
  return addresses;
}

WatchdogOptions watchdog_options(const LaunchEnv& env, std::chrono::milliseconds peer_timeout) {
  WatchdogOptions o;
  o.rank = env.rank;
  o.world_size = env.world_size;
  o.beat = kBeat;
  o.peer_timeout = peer_timeout;
  o.store_rank = env.agent_store ? -1 : 0;
  o.store = detail::endpoint(env);
  return o;
}

}  // namespace

Distributed::Distributed(const LaunchEnv& env, DistBackend backend, const torch::Device& device,
                         std::chrono::milliseconds timeout, DistLiveness liveness)
    : env_(env),
      backend_(backend),
      timeout_(timeout),
      peer_timeout_(liveness.peer_timeout),
      stop_request_(std::move(liveness.stop)) {
  check_backend(backend, device);
  // A write to a connection a dead peer (or an abort) closed must fail, not kill the process with
  // SIGPIPE: Python, where c10d usually runs, ignores it from the start.
  std::signal(SIGPIPE, SIG_IGN);
  abort_ =
      std::make_unique<detail::GroupAbort>(resolved_store(env), env.master_port, stop_request_);
  progress_ = std::make_unique<detail::RendezvousProgress>();

  DistWatchdog::Hooks hooks;
  hooks.abort = [abort = abort_.get()](const DistVerdict&) { abort->abort(); };
  hooks.give_up = [rank = env.rank, stop = stop_request_](const DistVerdict& v) {
    end_process_on_verdict(v, rank, stop ? stop->requested() : -1);
  };
  hooks.stop_requested = [stop = stop_request_] { return stop ? stop->requested() : -1; };
  hooks.waiting = [this](std::chrono::steady_clock::duration waited) {
    std::printf("[rank %d] rendezvous: waiting for %s (%.0f s so far, --dist-timeout-s %lld)\n",
                env_.rank, progress_->waiting_for(env_, backend_).c_str(),
                std::chrono::duration<double>(waited).count(),
                static_cast<long long>(timeout_.count() / 1000));
    std::fflush(stdout);
  };
  watchdog_ =
      std::make_unique<DistWatchdog>(watchdog_options(env, peer_timeout_), std::move(hooks),
                                     std::chrono::steady_clock::now() + timeout + kDeadlineSlack);
  try {
    group_ = std::make_unique<detail::Group>(
        detail::rendezvous(env, backend, device, timeout, *abort_, *progress_, *watchdog_));
  } catch (...) {
    watchdog_->stop();
    throw;
  }
  watchdog_->start_heartbeat([env, timeout]() -> std::unique_ptr<HeartbeatStore> {
    return std::make_unique<detail::C10dHeartbeatStore>(
        detail::connect_run_store(env, timeout, /*serve=*/false));
  });
}

Distributed::~Distributed() {
  // First, so that no abort runs while the group goes.
  if (watchdog_) watchdog_->stop();
#if TORCH_VERSION_MAJOR >= 2
  if (group_ && group_->group && !abort_->aborted()) {
    try {
      group_->group->shutdown();
    } catch (...) {
      // Teardown: a peer that is gone already cannot be told.
    }
  }
#endif
}

std::optional<DistVerdict> Distributed::verdict() const { return watchdog_->verdict(); }

std::optional<DistVerdict> Distributed::await_verdict() {
  return watchdog_->wait_verdict(peer_timeout_ + 2 * kBeat);
}

void Distributed::boundary() { watchdog_->boundary(); }

void Distributed::announce_failure(const std::string& what) { watchdog_->announce_failure(what); }

void Distributed::stand_down() { watchdog_->stand_down(); }

void Distributed::finish() { watchdog_->finish(peer_timeout_ + 2 * kBeat); }

void Distributed::set_give_up(std::function<void(const DistVerdict&)> give_up) {
  watchdog_->set_give_up(std::move(give_up));
}

void Distributed::barrier() {
  c10d::BarrierOptions options;
  options.timeout = timeout_;
  if (group_->device.is_cuda()) options.device_ids = {group_->device.index()};
  try {
    group_->group->barrier(options)->wait(timeout_);
  } catch (const std::exception& e) {
    throw std::runtime_error("the barrier before the capture, rank " + std::to_string(env_.rank) +
                             " of " + std::to_string(env_.world_size) + ": " + detail::what_of(e));
  }
}

void Distributed::broadcast_from_rank0(const std::vector<torch::Tensor>& tensors) {
  if (tensors.empty()) return;
  torch::NoGradGuard no_grad;  // parameters are overwritten in place, outside autograd
  c10d::broadcast_coalesced(group_->group, tensors, kBroadcastBucketBytes, 0);
}

void Distributed::all_reduce_sum(torch::Tensor& tensor) {
  std::vector<torch::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  options.timeout = timeout_;
  try {
    group_->group->allreduce(tensors, options)->wait(timeout_);
  } catch (const std::exception& e) {
    throw std::runtime_error("an all-reduce, rank " + std::to_string(env_.rank) + " of " +
                             std::to_string(env_.world_size) + ": " + detail::what_of(e));
  }
}

void Distributed::propose_stop(std::int64_t next_step, int signal) {
  const StopProposal proposal{next_step + kStopMargin, env_.rank, signal};
  // compareSet from "" to the value: the first proposal wins, a later one leaves it.
  group_->store->compareSet(kStopKey, {}, detail::bytes_of(encode(proposal)));
}

std::optional<StopProposal> Distributed::agreed_stop() {
  if (agreed_) return agreed_;
  if (!group_->store->check({kStopKey})) return std::nullopt;
  const std::string value = detail::text_of(group_->store->get(kStopKey));
  agreed_ = decode_stop_proposal(value);
  if (!agreed_) throw std::runtime_error("the store's stop agreement is not one: '" + value + "'");
  return agreed_;
}

std::string Distributed::nccl_version() const {
#if defined(WORKLOAD_HAVE_NCCL)
  return c10d::getNcclVersion();
#else
  return {};
#endif
}

}  // namespace workload
