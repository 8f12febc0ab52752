// Data parallelism on c10d: rendezvous, process groups (Gloo, NCCL) and the Reducer, across the two
// LibTorch lines this project builds against (1.13: the backend is the group; 2.x: a ProcessGroup
// dispatching to backends).
#include "lib/distributed.h"

#include <torch/version.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "data_pipeline/hash64.h"
#include "lib/nvtx.h"
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
                         std::chrono::milliseconds timeout)
    : env_(env), backend_(backend), timeout_(timeout) {
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

struct DataParallel::State {};
DataParallel::DataParallel(Distributed& dist, torch::nn::Module&, std::int64_t bucket_bytes,
                           bool broadcast_buffers)
    : dist_(dist), bucket_bytes_(bucket_bytes), broadcast_buffers_(broadcast_buffers) {}
DataParallel::~DataParallel() = default;
void DataParallel::before_forward() {}
void DataParallel::before_backward() {}

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

}  // namespace

struct Distributed::Impl {
  c10::intrusive_ptr<c10d::Store> store;  // this run's prefix of the rendezvous store
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  torch::Device device{torch::kCPU};
  std::optional<std::int64_t> stop;  // the agreed stop step, once known
  std::string stop_reason;
};

Distributed::Distributed(const DistEnv& env, DistBackend backend, const torch::Device& device,
                         std::chrono::milliseconds timeout)
    : env_(env), backend_(backend), timeout_(timeout), impl_(std::make_unique<Impl>()) {
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
  impl_->device = device;

  // The rendezvous store: torchrun's agent serves it (every rank is a client) or rank 0 does.
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.master_port);
  options.isServer = !env.agent_store && env.rank == 0;
  options.numWorkers = static_cast<std::size_t>(env.world_size);
  options.timeout = timeout;
  // A rendezvous that fails is the environment's fault (no store there, the port taken, a rank
  // missing): a usage error naming the variables, whether it shows in the store or in the group.
  const auto rendezvous_error = [&](const std::string& what, const std::exception& e) {
    return UsageError("MASTER_ADDR:MASTER_PORT: rank " + std::to_string(env.rank) + " of " +
                      std::to_string(env.world_size) + " could not " + what + " at " +
                      endpoint(env) + " within " + std::to_string(timeout.count() / 1000) +
                      " s (--dist-timeout-s): " + what_of(e));
  };
  c10::intrusive_ptr<c10d::Store> tcp;
  try {
    tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  } catch (const std::exception& e) {
    throw rendezvous_error(options.isServer ? "serve the rendezvous store" : "reach the store", e);
  }
  // A prefix per attempt, as torchrun restarts workers under a new count.
  impl_->store = c10::make_intrusive<c10d::PrefixStore>(
      "/worker/attempt_" + std::to_string(env.restart_count) + "/train_resnet50", tcp);
  impl_->store->setTimeout(timeout);
  auto group_store = c10::make_intrusive<c10d::PrefixStore>("default_pg", impl_->store);

  try {
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
      impl_->group = c10::make_intrusive<c10d::ProcessGroup>(group_store, env.rank, env.world_size);
      impl_->group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
      impl_->group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
#else
      impl_->group = gloo;
#endif
#endif
    } else {
#if defined(WORKLOAD_HAVE_NCCL)
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create(/*is_high_priority_stream=*/true);
      nccl_options->timeout = timeout;
      impl_->group = c10::make_intrusive<c10d::ProcessGroup>(group_store, env.rank, env.world_size);
      impl_->group->setBoundDeviceId(device);
      auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(group_store, env.rank, env.world_size,
                                                              nccl_options);
      impl_->group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl);
      impl_->group->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
#endif
    }
  } catch (const std::exception& e) {
    throw rendezvous_error(
        std::string("create its ") + to_string(backend) + " process group with the others", e);
  }
}

Distributed::~Distributed() {
#if TORCH_VERSION_MAJOR >= 2
  if (impl_ && impl_->group) {
    try {
      impl_->group->shutdown();
    } catch (...) {
      // Teardown: a peer that is gone already cannot be told.
    }
  }
#endif
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
  bool grad = true;  // the iteration has a backward (prepare_for_forward was called)
};

DataParallel::DataParallel(Distributed& dist, torch::nn::Module& model, std::int64_t bucket_bytes,
                           bool broadcast_buffers)
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
      /*gradient_as_bucket_view=*/false, std::unordered_map<std::size_t, std::string>{},
      kFirstBucketBytes);
#elif TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR == 11
  static_cast<void>(limits);
  state_->reducer = std::make_shared<c10d::Reducer>(
      params, buckets, group, sparse, bucket_bytes, /*find_unused_parameters=*/false,
      /*gradient_as_bucket_view=*/false, std::unordered_map<std::size_t, std::string>{},
      kFirstBucketBytes, /*skip_all_reduce_unused_params=*/false,
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

#endif  // WORKLOAD_HAVE_C10D

}  // namespace workload
