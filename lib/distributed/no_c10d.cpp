// Data parallelism in a build without c10d (no Gloo headers, no NCCL; CMake compiles this file in
// place of distributed.cpp and data_parallel.cpp): a distributed environment is a usage error.
#include "lib/core/usage_error.h"
#include "lib/distributed/data_parallel.h"
#include "lib/distributed/distributed.h"

namespace workload {

namespace detail {
// Never made here; complete only so that the owners' destructors compile.
struct Group {};
class GroupAbort {};
class RendezvousProgress {};
}  // namespace detail

Distributed::Distributed(const LaunchEnv& env, DistBackend backend, const torch::Device&,
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
void Distributed::all_reduce_sum(torch::Tensor&) {}
void Distributed::propose_stop(std::int64_t, int) {}
std::optional<StopProposal> Distributed::agreed_stop() { return std::nullopt; }
std::string Distributed::nccl_version() const { return {}; }
std::optional<DistVerdict> Distributed::verdict() const { return std::nullopt; }
std::optional<DistVerdict> Distributed::await_verdict() { return std::nullopt; }
void Distributed::boundary() {}
void Distributed::announce_failure(const std::string&) {}
void Distributed::stand_down() {}
void Distributed::finish() {}
void Distributed::set_give_up(std::function<void(const DistVerdict&)>) {}

struct DataParallel::State {};
DataParallel::DataParallel(Distributed& dist, torch::nn::Module&, std::int64_t,
                           bool broadcast_buffers, bool)
    : dist_(dist), broadcast_buffers_(broadcast_buffers) {}
DataParallel::~DataParallel() = default;
void DataParallel::before_forward() {}
void DataParallel::before_backward() {}
std::int64_t DataParallel::iterations() const { return 0; }
void DataParallel::before_capture() {}

}  // namespace workload
