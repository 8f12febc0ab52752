// One rank's rendezvous (lib/distributed/detail/rendezvous.h).
#include "lib/distributed/detail/rendezvous.h"

#include <cstdlib>
#include <stdexcept>
#include <thread>

#if defined(WORKLOAD_HAVE_GLOO)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if defined(WORKLOAD_HAVE_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/version.h>

#include "lib/core/usage_error.h"
#include "lib/distributed/detail/sockets.h"

namespace workload::detail {

namespace {

using Clock = std::chrono::steady_clock;
using Stage = RendezvousProgress::Stage;

// The join's period: how often a rank checks whether every rank has joined, and how often it looks
// up which have not (one store operation per rank), for the notices.
constexpr std::chrono::milliseconds kJoinPoll{20};
constexpr std::chrono::milliseconds kMissingPoll{1000};

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (const int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

// The join's deadline passed with ranks missing (they are in the progress).
class JoinDeadline : public std::runtime_error {
 public:
  JoinDeadline() : std::runtime_error("ranks missing") {}
};

bool serves_store(const LaunchEnv& env) { return !env.agent_store && env.rank == 0; }

std::vector<int> not_joined(c10d::Store& store, const std::vector<std::string>& keys) {
  std::vector<int> missing;
  for (std::size_t r = 0; r < keys.size(); ++r) {
    if (!store.check({keys[r]})) missing.push_back(static_cast<int>(r));
  }
  return missing;
}

// Every rank writes joined/<rank> and waits until all have. A store that never answers holds the
// check; the watchdog's deadline then shuts the connection down.
void join(c10d::Store& store, const LaunchEnv& env, Clock::time_point deadline,
          RendezvousProgress& progress) {
  std::vector<std::string> keys;
  keys.reserve(static_cast<std::size_t>(env.world_size));
  for (int r = 0; r < env.world_size; ++r) keys.push_back("joined/" + std::to_string(r));
  store.set(keys[static_cast<std::size_t>(env.rank)], bytes_of("1"));
  Clock::time_point looked{};
  for (;;) {
    const bool all = store.check(keys);
    if (all) return;
    const Clock::time_point now = Clock::now();
    if (now >= deadline || now - looked >= kMissingPoll) {
      progress.record_join(not_joined(store, keys));
      looked = now;
      if (now >= deadline) throw JoinDeadline();
    } else if (!progress.answered()) {
      progress.record_join(progress.missing());
    }
    std::this_thread::sleep_for(kJoinPoll);
  }
}

c10::intrusive_ptr<c10d::ProcessGroup> create_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const LaunchEnv& env, DistBackend backend,
                                                    const torch::Device& device,
                                                    std::chrono::milliseconds timeout) {
  auto group_store = c10::make_intrusive<c10d::PrefixStore>("default_pg", store);
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  if (backend == DistBackend::kGloo) {
#if defined(WORKLOAD_HAVE_GLOO)
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
    // GLOO_SOCKET_IFNAME picks the interface, as in PyTorch; otherwise this host's name (or the
    // loopback when it does not resolve).
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    gloo_options->devices.push_back(ifname && *ifname
                                        ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                                        : c10d::ProcessGroupGloo::createDefaultDevice());
    auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(group_store, env.rank, env.world_size,
                                                            gloo_options);
#if TORCH_VERSION_MAJOR >= 2
    group = c10::make_intrusive<c10d::ProcessGroup>(group_store, env.rank, env.world_size);
    group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
#else
    group = gloo;  // 1.13: the backend is the group
#endif
#endif
  } else {
#if defined(WORKLOAD_HAVE_NCCL)
    auto nccl_options = c10d::ProcessGroupNCCL::Options::create(/*is_high_priority_stream=*/true);
    nccl_options->timeout = timeout;
    group = c10::make_intrusive<c10d::ProcessGroup>(group_store, env.rank, env.world_size);
    group->setBoundDeviceId(device);
    auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(group_store, env.rank, env.world_size,
                                                            nccl_options);
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
#endif
  }
  if (!group) throw std::logic_error("no process group for this backend in this build");
  return group;
}

// What the store's silence or failure at `stage` says.
std::string store_trouble(const LaunchEnv& env, const RendezvousProgress& progress,
                          const std::string& within, bool late, const std::exception& e) {
  const std::string silent =
      "something other than a c10d store listens there, or the rank serving it is frozen";
  if (progress.stage() == Stage::kConnect) {
    if (late) return "no answer from the store within " + within + ": " + silent;
    return (serves_store(env) ? "could not serve the rendezvous store: "
                              : "could not reach the store: ") +
           what_of(e);
  }
  if (!progress.answered() || late) {
    return "the store accepted the connection but did not answer within " + within + ": " + silent;
  }
  return "the store closed the connection during the rendezvous (" + what_of(e) + ")";
}

// The rendezvous's failure as the user's error: what happened, at which stage, in what time.
[[noreturn]] void throw_failure(const LaunchEnv& env, DistBackend backend,
                                std::chrono::milliseconds timeout,
                                const RendezvousProgress& progress,
                                const std::optional<DistVerdict>& verdict,
                                const std::exception& e) {
  const std::string where = "rank " + std::to_string(env.rank) + " of " +
                            std::to_string(env.world_size) + ", store " + endpoint(env);
  const std::string within = std::to_string(timeout.count() / 1000) + " s (--dist-timeout-s)";
  const bool late = verdict && verdict->kind == DistVerdict::Kind::kDeadline;
  const std::vector<int> missing = progress.missing();
  std::string what;
  if (dynamic_cast<const JoinDeadline*>(&e) && !missing.empty()) {
    what = (missing.size() == 1 ? "rank " : "ranks ") + rank_list(missing) +
           " did not join within " + within + ": the store is up, and no such rank reached it";
  } else if (progress.stage() == Stage::kGroup) {
    what = std::string("could not create its ") + to_string(backend) +
           " process group with the others" + (late ? " within " + within : "") + ": " + what_of(e);
  } else {
    what = store_trouble(env, progress, within, late, e);
  }
  throw UsageError("MASTER_ADDR:MASTER_PORT: " + where + ": " + what);
}

}  // namespace

void RendezvousProgress::enter(Stage stage) {
  std::lock_guard<std::mutex> lock(mu_);
  stage_ = stage;
}

void RendezvousProgress::record_join(std::vector<int> missing) {
  std::lock_guard<std::mutex> lock(mu_);
  answered_ = true;
  missing_ = std::move(missing);
}

RendezvousProgress::Stage RendezvousProgress::stage() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stage_;
}

bool RendezvousProgress::answered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return answered_;
}

std::vector<int> RendezvousProgress::missing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return missing_;
}

std::string RendezvousProgress::waiting_for(const LaunchEnv& env, DistBackend backend) const {
  std::lock_guard<std::mutex> lock(mu_);
  switch (stage_) {
    case Stage::kConnect:
      return "the store at " + endpoint(env) +
             (env.agent_store ? " (served by torchrun's agent)"
              : env.rank == 0 ? " (served by this rank)"
                              : " (served by rank 0)");
    case Stage::kJoin:
      if (!answered_) return "an answer from the store at " + endpoint(env);
      if (missing_.empty()) return "every rank to join";
      return (missing_.size() == 1 ? "rank " : "ranks ") + rank_list(missing_) + " to join (" +
             std::to_string(env.world_size - static_cast<int>(missing_.size())) + " of " +
             std::to_string(env.world_size) + " have)";
    case Stage::kGroup:
      return std::string("the ") + to_string(backend) + " process group to be created";
  }
  return "the rendezvous";
}

Group rendezvous(const LaunchEnv& env, DistBackend backend, const torch::Device& device,
                 std::chrono::milliseconds timeout, GroupAbort& abort, RendezvousProgress& progress,
                 const DistWatchdog& watchdog) {
  const auto deadline = Clock::now() + timeout;
  Group out;
  out.device = device;
  try {
    progress.enter(Stage::kConnect);
    out.store = connect_run_store(env, timeout, serves_store(env));
    if (serves_store(env)) {
      // LibTorch 1.13's store serves one request at a time and reads the rest of a request with
      // blocking receives: a peer frozen between two writes of one request (SIGSTOP, a debugger)
      // silenced it for every rank, and its teardown then waited for ever on that receive. Bounded,
      // it drops that connection and answers the others before they miss it (2.x's libuv server
      // never blocks on one client).
      bound_server_receives(env.master_port, watchdog.options().peer_timeout / 2);
    }
    progress.enter(Stage::kJoin);
    join(*out.store, env, deadline, progress);
    progress.enter(Stage::kGroup);
    const std::vector<SocketId> before = tcp_sockets();
    out.group = create_group(out.store, env, backend, device, timeout);
    abort.adopt(out.group, before);
  } catch (const std::exception& e) {
    throw_failure(env, backend, timeout, progress, watchdog.verdict(), e);
  }
  return out;
}

}  // namespace workload::detail
