// The replicas' digest (lib/distributed/data_parallel.h), in every build.
#include "common/hash64.h"
#include "lib/distributed/data_parallel.h"

namespace workload {

std::uint64_t parameter_digest(const torch::nn::Module& model) {
  std::uint64_t h = 0;
  for (const auto& p : model.parameters()) {
    const torch::Tensor host = p.detach().to(torch::kCPU).contiguous();
    h = common::hash64(host.data_ptr(), static_cast<std::size_t>(host.nbytes()), h);
  }
  return h;
}

}  // namespace workload
