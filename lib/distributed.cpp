// Data parallelism on c10d: rendezvous, process groups (Gloo, NCCL) and the Reducer, across the two
// LibTorch lines this project builds against (1.13: the backend is the group; 2.x: a ProcessGroup
// dispatching to backends).
#include "lib/distributed.h"

#include <torch/version.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "data_pipeline/hash64.h"
#include "lib/detail/sockets.h"
#include "lib/nvtx.h"
#include "lib/stop_control.h"
#include "lib/usage_error.h"

#if defined(WORKLOAD_HAVE_C10D)
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#if defined(WORKLOAD_HAVE_GLOO)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if defined(WORKLOAD_HAVE_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#endif

namespace workload {

bool dist_backend_available(DistBackend backend) {
  switch (backend) {
    case DistBackend::kGloo:
#if defined(WORKLOAD_HAVE_GLOO)
      return true;
#else
      return false;
#endif
    case DistBackend::kNccl:
#if defined(WORKLOAD_HAVE_NCCL)
      return true;
#else
      return false;
#endif
  }
  return false;
}

std::uint64_t parameter_digest(const torch::nn::Module& model) {
  std::uint64_t h = 0;
  for (const auto& p : model.parameters()) {
    const torch::Tensor host = p.detach().to(torch::kCPU).contiguous();
    h = data_pipeline::hash64(host.data_ptr(), static_cast<std::size_t>(host.nbytes()), h);
  }
  return h;
}

#if !defined(WORKLOAD_HAVE_C10D)

// A build without c10d (no Gloo headers, no NCCL): a distributed environment is a usage error.
struct Distributed::Impl {};

Distributed::Distributed(const DistEnv& env, DistBackend backend, const torch::Device&,
                         std::chrono::milliseconds timeout, DistLiveness liveness)
    : env_(env), backend_(backend), timeout_(timeout), peer_timeout_(liveness.peer_timeout) {
  throw UsageError(std::string("--dist-backend ") + to_string(backend) +
                   ": this build has no c10d backend (Gloo's headers or NCCL were not found when "
                   "it was configured), so it cannot join a distributed run (WORLD_SIZE=" +
                   std::to_string(env.world_size) + ")");
}
Distributed::~Distributed() = default;
void Distributed::barrier() {}
void Distributed::broadcast_from_rank0(const std::vector<torch::Tensor>&) {}
void Distributed::propose_stop(std::int64_t, const std::string&) {}
std::optional<std::int64_t> Distributed::agreed_stop() { return std::nullopt; }
std::string Distributed::stop_reason() { return {}; }
std::string Distributed::nccl_version() const { return {}; }
std::optional<DistVerdict> Distributed::verdict() const { return std::nullopt; }
std::optional<DistVerdict> Distributed::await_verdict() { return std::nullopt; }
void Distributed::boundary() {}
void Distributed::announce_failure(const std::string&) {}
void Distributed::stand_down() {}
void Distributed::finish() {}
void Distributed::set_give_up(std::function<void(const DistVerdict&)>) {}

struct DataParallel::State {};
DataParallel::DataParallel(Distributed& dist, torch::nn::Module&, std::int64_t bucket_bytes,
                           bool broadcast_buffers, bool)
    : dist_(dist), bucket_bytes_(bucket_bytes), broadcast_buffers_(broadcast_buffers) {}
DataParallel::~DataParallel() = default;
void DataParallel::before_forward() {}
void DataParallel::before_backward() {}
std::int64_t DataParallel::iterations() const { return 0; }
void DataParallel::before_capture() {}

#else  // WORKLOAD_HAVE_C10D

namespace {

// DDP broadcasts module states in coalesced buffers of 250 MiB (its broadcast_bucket_size), and its
// first gradient bucket holds 1 MiB (torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES).
constexpr std::size_t kBroadcastBucketBytes = std::size_t{250} << 20;

// The store key of the stop agreement: "<step> rank <r>: <reason>".
constexpr const char* kStopKey = "stop";

// The first line of an exception's message (LibTorch's carry a C++ backtrace after it).
std::string what_of(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  const std::string what = c10 ? c10->what_without_backtrace() : e.what();
  return what.substr(0, what.find('\n'));
}

std::string endpoint(const DistEnv& env) {
  return env.master_addr + ":" + std::to_string(env.master_port);
}

std::string text_of(const std::vector<std::uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}
std::vector<std::uint8_t> bytes_of(const std::string& text) {
  return std::vector<std::uint8_t>(text.begin(), text.end());
}

// A stop request or the deadline ended the rendezvous: the rendezvous's deadline leaves the
// trainer's own checks (the join's) a second to report first.
constexpr std::chrono::milliseconds kDeadlineSlack{1000};
// The join's period: how often a rank checks who has joined.
constexpr std::chrono::milliseconds kJoinPoll{20};
// The heartbeat's period (lib/dist_watchdog.h).
constexpr std::chrono::milliseconds kBeat{1000};

// The store operations of the heartbeat, on its own connection to the run's prefix.
class C10dHeartbeatStore : public HeartbeatStore {
 public:
  explicit C10dHeartbeatStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    return store_->add(key, delta);
  }
  void set_once(const std::string& key, const std::string& value) override {
    store_->compareSet(key, {}, bytes_of(value));
  }
  std::optional<std::string> get_if_set(const std::string& key) override {
    if (!store_->check({key})) return std::nullopt;
    return text_of(store_->get(key));
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

// Where the rendezvous stopped, for its message.
enum class Stage { kConnect, kJoin, kGroup };

// The join's facts, for its message when it fails.
struct Join {
  bool answered = false;  // the store answered a check
  std::vector<int> missing;
};

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (const int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

// The default last resort: one line on stderr (written directly: no stream lock can hold it) and
// the verdict's exit status, without destructors (the trainer's thread is stuck in one of them).
void exit_on_verdict(const DistVerdict& verdict, int rank) {
  const std::string line = std::string(program_invocation_short_name) + " (rank " +
                           std::to_string(rank) + "): error: " + verdict.reason +
                           "; its thread did not come back after the abort: exiting\n";
  const ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
  static_cast<void>(written);
  std::_Exit(exit_code(verdict));
}

}  // namespace

struct Distributed::Impl {
  c10::intrusive_ptr<c10d::Store> store;  // this run's prefix of the rendezvous store
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  torch::Device device{torch::kCPU};
  std::optional<std::int64_t> stop;  // the agreed stop step, once known
  std::string stop_reason;
  std::shared_ptr<StopRequest> stop_request;

  // What abort() ends, under abort_mu (the watchdog's thread aborts while the trainer's thread may
  // still be creating the group).
  std::mutex abort_mu;
  c10::intrusive_ptr<c10d::ProcessGroup> abortable;  // the group, once created
  std::vector<detail::SocketId> group_sockets;       // the group's own connections (Gloo's)
  std::vector<std::string> store_addresses;          // MASTER_ADDR, resolved
  int store_port = 0;
  bool aborted = false;

  // Last: destroyed first, so that no abort runs while the members above go.
  std::unique_ptr<DistWatchdog> watchdog;

  // Ends every wait of the group and of the store at once (the watchdog's thread).
  void abort() {
    std::lock_guard<std::mutex> lock(abort_mu);
    aborted = true;
#if TORCH_VERSION_MAJOR >= 2
    // NCCL's communicators (ncclCommAbort): kernels waiting for a peer end, and so do host waits
    // on them. Gloo's backend has nothing to abort there; its sockets are shut down below.
    if (abortable) {
      try {
        abortable->abort();
      } catch (...) {
        // Aborting is best effort: the sockets below still end Gloo's and the store's waits.
      }
    }
#endif
    detail::shutdown_sockets(group_sockets);
    detail::shutdown_connections_to(store_addresses, store_port);
    if (stop_request) stop_request->interrupt();
  }

  void connect_store(const DistEnv& env, std::chrono::milliseconds timeout);
  void join(const DistEnv& env, std::chrono::steady_clock::time_point deadline, Join& facts);
  void create_group(const DistEnv& env, DistBackend backend, const torch::Device& device,
                    std::chrono::milliseconds timeout);
};

// The rendezvous store: torchrun's agent serves it (every rank is a client) or rank 0 does. No
// waiting for the other ranks here (join() does it, naming those missing).
void Distributed::Impl::connect_store(const DistEnv& env, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.master_port);
  options.isServer = !env.agent_store && env.rank == 0;
  options.numWorkers = static_cast<std::size_t>(env.world_size);
  options.waitWorkers = false;
  options.timeout = timeout;
  auto tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  // A prefix per attempt, as torchrun restarts workers under a new count.
  store = c10::make_intrusive<c10d::PrefixStore>(
      "/worker/attempt_" + std::to_string(env.restart_count) + "/train_resnet50", tcp);
  store->setTimeout(timeout);
}

// Every rank writes joined/<rank> and waits until all have. A store that never answers holds the
// check; the watchdog's deadline then shuts the connection down.
void Distributed::Impl::join(const DistEnv& env, std::chrono::steady_clock::time_point deadline,
                             Join& facts) {
  std::vector<std::string> keys;
  for (int r = 0; r < env.world_size; ++r) keys.push_back("joined/" + std::to_string(r));
  store->set(keys[static_cast<std::size_t>(env.rank)], bytes_of("1"));
  for (;;) {
    const bool all = store->check(keys);
    facts.answered = true;
    if (all) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (int r = 0; r < env.world_size; ++r) {
        if (!store->check({keys[static_cast<std::size_t>(r)]})) facts.missing.push_back(r);
      }
      throw std::runtime_error("ranks missing");
    }
    std::this_thread::sleep_for(kJoinPoll);
  }
}

void Distributed::Impl::create_group(const DistEnv& env, DistBackend backend,
                                     const torch::Device& device,
                                     std::chrono::milliseconds timeout) {
  auto group_store = c10::make_intrusive<c10d::PrefixStore>("default_pg", store);
  // The connections the group opens (Gloo's pairs; NCCL's come later, and abort() ends them):
  // those the watchdog shuts down to end a collective's wait.
  const std::vector<detail::SocketId> before = detail::tcp_sockets();
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
    group = gloo;
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
  std::lock_guard<std::mutex> lock(abort_mu);
  group_sockets = detail::new_sockets(before, detail::tcp_sockets(), env.master_port);
  abortable = group;
  if (aborted) throw std::runtime_error("aborted while the group was created");
}

namespace {

// The rendezvous's failure as the user's error: what happened, at which stage, in what time.
[[noreturn]] void throw_rendezvous_failure(const DistEnv& env, DistBackend backend,
                                           std::chrono::milliseconds timeout, Stage stage,
                                           const Join& join, const std::optional<DistVerdict>& v,
                                           const std::exception& e) {
  const std::string where = "rank " + std::to_string(env.rank) + " of " +
                            std::to_string(env.world_size) + ", store " + endpoint(env);
  if (v && v->kind == DistVerdict::Kind::kStop) {
    throw RendezvousStopped(v->signal, signal_name(v->signal) + " during the rendezvous (" + where +
                                           "): stopped before the run");
  }
  const std::string within = std::to_string(timeout.count() / 1000) + " s (--dist-timeout-s)";
  const bool late = v && v->kind == DistVerdict::Kind::kDeadline;
  const bool server = !env.agent_store && env.rank == 0;
  std::string what;
  if (stage == Stage::kConnect) {
    what =
        late ? "no answer from the store within " + within +
                   ": something other than a c10d store listens there, or the rank serving it "
                   "is frozen"
             : (server ? "could not serve the rendezvous store: " : "could not reach the store: ") +
                   what_of(e);
  } else if (stage == Stage::kJoin && !join.missing.empty()) {
    what = (join.missing.size() == 1 ? "rank " : "ranks ") + rank_list(join.missing) +
           " did not join within " + within + ": the store is up, and no such rank reached it";
  } else if (stage == Stage::kJoin) {
    what = !join.answered || late
               ? "the store accepted the connection but did not answer within " + within +
                     ": something other than a c10d store listens there, or the rank serving it "
                     "is frozen"
               : "the store closed the connection during the rendezvous (" + what_of(e) + ")";
  } else {
    what = std::string("could not create its ") + to_string(backend) +
           " process group with the others" + (late ? " within " + within : "") + ": " + what_of(e);
  }
  throw UsageError("MASTER_ADDR:MASTER_PORT: " + where + ": " + what);
}

}  // namespace

Distributed::Distributed(const DistEnv& env, DistBackend backend, const torch::Device& device,
                         std::chrono::milliseconds timeout, DistLiveness liveness)
    : env_(env),
      backend_(backend),
      timeout_(timeout),
      peer_timeout_(liveness.peer_timeout),
      impl_(std::make_unique<Impl>()) {
  if (!dist_backend_available(backend)) {
    throw UsageError(
        std::string("--dist-backend ") + to_string(backend) + ": this build does not carry it (" +
        (backend == DistBackend::kNccl ? "NCCL needs a CUDA LibTorch and NCCL's headers"
                                       : "Gloo needs Gloo's headers, e.g. Debian's libgloo-dev") +
        ")");
  }
  if (backend == DistBackend::kNccl && !device.is_cuda()) {
    throw UsageError(
        "--dist-backend nccl: NCCL runs on GPUs, and this run's device is the CPU; "
        "use --dist-backend gloo with --device cpu");
  }
  // A write to a connection a dead peer (or an abort) closed must fail, not kill the process with
  // SIGPIPE: Python, where c10d usually runs, ignores it from the start.
  std::signal(SIGPIPE, SIG_IGN);
  Impl& impl = *impl_;
  impl.device = device;
  impl.stop_request = liveness.stop;
  impl.store_addresses = detail::resolve(env.master_addr);
  impl.store_port = env.master_port;

  WatchdogOptions options;
  options.rank = env.rank;
  options.world_size = env.world_size;
  options.beat = kBeat;
  options.peer_timeout = liveness.peer_timeout;
  options.store_rank = env.agent_store ? -1 : 0;
  options.store = endpoint(env);
  DistWatchdog::Hooks hooks;
  hooks.abort = [&impl](const DistVerdict&) { impl.abort(); };
  hooks.give_up = [rank = env.rank](const DistVerdict& v) { exit_on_verdict(v, rank); };
  hooks.stop_requested = [stop = liveness.stop] { return stop ? stop->requested() : -1; };
  const auto start = std::chrono::steady_clock::now();
  impl.watchdog =
      std::make_unique<DistWatchdog>(options, std::move(hooks), start + timeout + kDeadlineSlack);

  Stage stage = Stage::kConnect;
  Join join;
  try {
    impl.connect_store(env, timeout);
    stage = Stage::kJoin;
    impl.join(env, start + timeout, join);
    stage = Stage::kGroup;
    impl.create_group(env, backend, device, timeout);
  } catch (const std::exception& e) {
    impl.watchdog->stop();
    throw_rendezvous_failure(env, backend, timeout, stage, join, impl.watchdog->verdict(), e);
  }
  impl.watchdog->start_heartbeat([addr = env.master_addr, port = env.master_port, timeout,
                                  prefix = "/worker/attempt_" + std::to_string(env.restart_count) +
                                           "/train_resnet50"]() -> std::unique_ptr<HeartbeatStore> {
    c10d::TCPStoreOptions o;
    o.port = static_cast<std::uint16_t>(port);
    o.waitWorkers = false;
    o.timeout = timeout;
    auto tcp = c10::make_intrusive<c10d::TCPStore>(addr, o);
    return std::make_unique<C10dHeartbeatStore>(
        c10::make_intrusive<c10d::PrefixStore>(prefix, tcp));
  });
}

Distributed::~Distributed() {
  if (!impl_) return;
  // First, so that no abort runs while the group goes.
  if (impl_->watchdog) impl_->watchdog->stop();
#if TORCH_VERSION_MAJOR >= 2
  if (impl_->group && !impl_->aborted) {
    try {
      impl_->group->shutdown();
    } catch (...) {
      // Teardown: a peer that is gone already cannot be told.
    }
  }
#endif
}

std::optional<DistVerdict> Distributed::verdict() const { return impl_->watchdog->verdict(); }

std::optional<DistVerdict> Distributed::await_verdict() {
  return impl_->watchdog->wait_verdict(peer_timeout_ + 2 * kBeat);
}

void Distributed::boundary() { impl_->watchdog->boundary(); }

void Distributed::announce_failure(const std::string& what) {
  impl_->watchdog->announce_failure(what);
}

void Distributed::stand_down() { impl_->watchdog->stand_down(); }

void Distributed::finish() { impl_->watchdog->finish(peer_timeout_ + 2 * kBeat); }

void Distributed::set_give_up(std::function<void(const DistVerdict&)> give_up) {
  impl_->watchdog->set_give_up(std::move(give_up));
}

void Distributed::barrier() {
  c10d::BarrierOptions options;
  options.timeout = timeout_;
  if (impl_->device.is_cuda()) options.device_ids = {impl_->device.index()};
  try {
    impl_->group->barrier(options)->wait(timeout_);
  } catch (const std::exception& e) {
    throw std::runtime_error("the barrier before the capture, rank " + std::to_string(env_.rank) +
                             " of " + std::to_string(env_.world_size) + ": " + what_of(e));
  }
}

void Distributed::broadcast_from_rank0(const std::vector<torch::Tensor>& tensors) {
  if (tensors.empty()) return;
  torch::NoGradGuard no_grad;  // parameters are overwritten in place, outside autograd
  c10d::broadcast_coalesced(impl_->group, tensors, kBroadcastBucketBytes, 0);
}

void Distributed::propose_stop(std::int64_t next_step, const std::string& reason) {
  const std::string value = std::to_string(next_step + kStopMargin) + " rank " +
                            std::to_string(env_.rank) + ": " + reason;
  // compareSet from "" to the value: the first proposal wins, a later one leaves it.
  impl_->store->compareSet(kStopKey, {}, bytes_of(value));
}

std::optional<std::int64_t> Distributed::agreed_stop() {
  if (impl_->stop) return impl_->stop;
  if (!impl_->store->check({kStopKey})) return std::nullopt;
  const std::string agreed = text_of(impl_->store->get(kStopKey));  // "<step> rank <r>: <why>"
  impl_->stop = static_cast<std::int64_t>(std::stoll(agreed));
  impl_->stop_reason = agreed.substr(agreed.find(' ') + 1);
  return impl_->stop;
}

std::string Distributed::stop_reason() { return impl_->stop_reason; }

std::string Distributed::nccl_version() const {
#if defined(WORKLOAD_HAVE_NCCL)
  return c10d::getNcclVersion();
#else
  return {};
#endif
}

// ---------------------------------------------------------------------------------------------
// DataParallel

struct DataParallel::State {
  std::shared_ptr<c10d::Reducer> reducer;
  bool grad = true;             // the iteration has a backward (prepare_for_forward was called)
  std::int64_t iterations = 0;  // prepare_for_forward calls
};

DataParallel::DataParallel(Distributed& dist, torch::nn::Module& model, std::int64_t bucket_bytes,
                           bool broadcast_buffers, bool gradient_as_bucket_view)
    : dist_(dist),
      bucket_bytes_(bucket_bytes),
      broadcast_buffers_(broadcast_buffers),
      buffers_(model.buffers()),
      state_(std::make_unique<State>()) {
  const auto group = dist.impl().group;
  std::vector<torch::Tensor> params;
  for (const auto& p : model.parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  // A 1x1 convolution's weight (H = W = 1) already counts as channels_last whatever the strides of
  // its unit dimensions, so .contiguous(ChannelsLast) leaves them as they were; its gradients come
  // with channels_last's canonical strides (C*H*W, 1, W*C, C). The Reducer's bucket views follow
  // the parameters' strides, and it warns at each mismatch: give such parameters the canonical
  // strides first (the same memory order, so nothing else changes).
  {
    torch::NoGradGuard no_grad;
    for (auto& p : params) {
      if (p.dim() != 4 || !p.is_contiguous(torch::MemoryFormat::ChannelsLast)) continue;
      const auto size = p.sizes();
      const std::vector<std::int64_t> canonical = {size[1] * size[2] * size[3], 1,
                                                   size[3] * size[1], size[1]};
      if (p.strides().vec() == canonical) continue;
      torch::Tensor restrided = torch::empty_strided(size, canonical, p.options());
      restrided.copy_(p);
      p.set_data(restrided);
    }
  }
  c10d::verify_params_across_processes(group, params, {});
  // The module's state from rank 0, parameters and buffers, as DDP does at construction.
  std::vector<torch::Tensor> states = params;
  states.insert(states.end(), buffers_.begin(), buffers_.end());
  dist.broadcast_from_rank0(states);

  // Iteration 0 runs as one bucket; the Reducer rebuilds the buckets (first kFirstBucketBytes,
  // then bucket_bytes) in the order the gradients became ready, before iteration 1.
  const std::vector<bool> sparse(params.size(), false);
  auto assignment = c10d::compute_bucket_assignment_by_size(
      params, {std::numeric_limits<std::size_t>::max()}, sparse);
  auto buckets = std::get<0>(assignment);
  auto limits = std::get<1>(assignment);
  std::reverse(buckets.begin(), buckets.end());
  std::reverse(limits.begin(), limits.end());
#if TORCH_VERSION_MAJOR == 1 && TORCH_VERSION_MINOR == 13
  state_->reducer = std::make_shared<c10d::Reducer>(
      params, buckets, limits, group, sparse, bucket_bytes, /*find_unused_parameters=*/false,
      gradient_as_bucket_view, std::unordered_map<std::size_t, std::string>{}, kFirstBucketBytes);
#elif TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR == 11
  static_cast<void>(limits);
  state_->reducer = std::make_shared<c10d::Reducer>(
      params, buckets, group, sparse, bucket_bytes, /*find_unused_parameters=*/false,
      gradient_as_bucket_view, std::unordered_map<std::size_t, std::string>{}, kFirstBucketBytes,
      /*skip_all_reduce_unused_params=*/false,
      /*use_python_reducer=*/false, /*bucket_bytes_cap_list=*/std::vector<std::int64_t>{});
#else
#error "c10d::Reducer's constructor is known for LibTorch 1.13 and 2.11 only: add this version's"
#endif
}

DataParallel::~DataParallel() = default;

void DataParallel::before_forward() {
  state_->grad = torch::GradMode::is_enabled();
  if (state_->grad) {
    state_->reducer->prepare_for_forward();
    ++state_->iterations;
    nvtx::DdpRange range(nvtx::kRebuildBuckets);
    state_->reducer->rebuild_buckets();  // a collective, and real work once: before iteration 1
  }
  if (broadcast_buffers_ && dist_.world_size() > 1) {
    nvtx::DdpRange range(nvtx::kBroadcastBuffers);
    dist_.broadcast_from_rank0(buffers_);
  }
}

void DataParallel::before_backward() {
  // Every parameter takes part in every iteration (find_unused_parameters=False): DDP passes no
  // outputs to search for unused ones.
  if (state_->grad) state_->reducer->prepare_for_backward({});
}

std::int64_t DataParallel::iterations() const { return state_->iterations; }

void DataParallel::before_capture() {
  if (state_->iterations < kDdpGraphWarmup) {
    throw std::runtime_error("DDP ran " + std::to_string(state_->iterations) +
                             " eager iterations before the capture; a graph of its step needs " +
                             std::to_string(kDdpGraphWarmup));
  }
  // The Reducer times its iterations 1 to 10 and every sample_rate-th with CUDA events: after the
  // check above, a sample rate no iteration count reaches leaves none.
  state_->reducer->set_ddp_runtime_logging_sample_rate(std::numeric_limits<int>::max());
}

#endif  // WORKLOAD_HAVE_C10D

}  // namespace workload
