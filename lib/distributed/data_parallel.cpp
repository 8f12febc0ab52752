// DDP's gradient synchronisation on c10d's Reducer (lib/distributed/data_parallel.h), for builds
// with c10d.
#include "lib/distributed/data_parallel.h"

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "lib/distributed/detail/c10d_store.h"
#include "lib/distributed/distributed.h"
#include "lib/instrument/nvtx.h"

namespace workload {

namespace {

// A 1x1 convolution's weight (H = W = 1) already counts as channels_last whatever the strides of
// its unit dimensions, so .contiguous(ChannelsLast) leaves them as they were; its gradients come
// with channels_last's canonical strides (C*H*W, 1, W*C, C). The Reducer's bucket views follow
// the parameters' strides, and it warns at each mismatch: give such parameters the canonical
// strides first (the same memory order, so nothing else changes).
void canonical_channels_last(std::vector<torch::Tensor>& params) {
  torch::NoGradGuard no_grad;
  for (auto& p : params) {
    if (p.dim() != 4 || !p.is_contiguous(torch::MemoryFormat::ChannelsLast)) continue;
    const auto size = p.sizes();
    const std::vector<std::int64_t> canonical = {size[1] * size[2] * size[3], 1, size[3] * size[1],
                                                 size[1]};
    if (p.strides().vec() == canonical) continue;
    torch::Tensor restrided = torch::empty_strided(size, canonical, p.options());
    restrided.copy_(p);
    p.set_data(restrided);
  }
}

// Iteration 0 runs as one bucket; the Reducer rebuilds the buckets (first kFirstBucketBytes, then
// bucket_bytes) in the order the gradients became ready, before iteration 1.
std::shared_ptr<c10d::Reducer> make_reducer(const std::vector<torch::Tensor>& params,
                                            const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                                            std::int64_t bucket_bytes, bool bucket_view) {
  const std::vector<bool> sparse(params.size(), false);
  auto assignment = c10d::compute_bucket_assignment_by_size(
      params, {std::numeric_limits<std::size_t>::max()}, sparse);
  auto buckets = std::get<0>(assignment);
  auto limits = std::get<1>(assignment);
  std::reverse(buckets.begin(), buckets.end());
  std::reverse(limits.begin(), limits.end());
#if TORCH_VERSION_MAJOR == 1 && TORCH_VERSION_MINOR == 13
  return std::make_shared<c10d::Reducer>(
      params, buckets, limits, group, sparse, bucket_bytes, /*find_unused_parameters=*/false,
      bucket_view, std::unordered_map<std::size_t, std::string>{}, kFirstBucketBytes);
#elif TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR == 11
  static_cast<void>(limits);
  return std::make_shared<c10d::Reducer>(
      params, buckets, group, sparse, bucket_bytes, /*find_unused_parameters=*/false, bucket_view,
      std::unordered_map<std::size_t, std::string>{}, kFirstBucketBytes,
      /*skip_all_reduce_unused_params=*/false,
      /*use_python_reducer=*/false, /*bucket_bytes_cap_list=*/std::vector<std::int64_t>{});
#else
#error "c10d::Reducer's constructor is known for LibTorch 1.13 and 2.11 only: add this version's"
#endif
}

}  // namespace

struct DataParallel::State {
  std::shared_ptr<c10d::Reducer> reducer;
  bool grad = true;             // the iteration has a backward (prepare_for_forward was called)
  std::int64_t iterations = 0;  // prepare_for_forward calls
};

DataParallel::DataParallel(Distributed& dist, torch::nn::Module& model, std::int64_t bucket_bytes,
                           bool broadcast_buffers, bool gradient_as_bucket_view)
    : dist_(dist),
      broadcast_buffers_(broadcast_buffers),
      buffers_(model.buffers()),
      state_(std::make_unique<State>()) {
  const auto& group = dist.group().group;
  std::vector<torch::Tensor> params;
  for (const auto& p : model.parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  canonical_channels_last(params);
  c10d::verify_params_across_processes(group, params, {});
  // The module's state from rank 0, parameters and buffers, as DDP does at construction.
  std::vector<torch::Tensor> states = params;
  states.insert(states.end(), buffers_.begin(), buffers_.end());
  dist.broadcast_from_rank0(states);
  state_->reducer = make_reducer(params, group, bucket_bytes, gradient_as_bucket_view);
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

}  // namespace workload
