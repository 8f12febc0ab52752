// The GPU decode stage's output buffers: allocation, the free/taken bookkeeping and its fences.
#include "data_pipeline/gpu/output_pool.h"

#include <utility>

#include "data_pipeline/nvtx_domain.h"

namespace data_pipeline::gpu {

OutputPool::OutputPool(int slots, std::int64_t batch_size, int image_size, bool float32,
                       bool planar, int device)
    : planar_(planar) {
  const auto dtype = float32 ? torch::kFloat32 : torch::kUInt8;
  const torch::Device dev(torch::kCUDA, static_cast<c10::DeviceIndex>(device));
  for (int i = 0; i < slots; ++i) {
    Slot s;
    const std::vector<std::int64_t> shape =
        planar ? std::vector<std::int64_t>{batch_size, 3, image_size, image_size}
               : std::vector<std::int64_t>{batch_size, image_size, image_size, 3};
    s.images = torch::empty(shape, torch::TensorOptions().dtype(dtype).device(dev));
    s.labels = torch::empty({batch_size}, torch::TensorOptions().dtype(torch::kInt64).device(dev));
    s.ready = std::make_unique<CudaEvent>();
    slots_.push_back(std::move(s));
  }
}

OutputPool::~OutputPool() {
  // The device may still read released buffers: wait before the memory goes.
  wait_released_fences(slots_);
}

std::optional<std::size_t> OutputPool::acquire() {
  ReuseFence fence;
  std::optional<std::size_t> slot;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] {
      if (stopping_) return true;
      slot = first_free_locked();
      return slot.has_value();
    });
    if (stopping_) return std::nullopt;
    slots_[*slot].busy = true;
    fence = std::exchange(slots_[*slot].fence, nullptr);
  }
  if (fence) {
    nvtx::ScopedRange range(nvtx::kReuseFence);
    fence();
  }
  return slot;
}

std::optional<std::size_t> OutputPool::first_free_locked() const {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].busy) return i;
  }
  return std::nullopt;
}

void OutputPool::release(std::size_t slot, ReuseFence fence) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& s = slots_[slot];
    s.busy = false;
    s.fence = std::move(fence);
  }
  cv_.notify_all();
}

void OutputPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

torch::Tensor OutputPool::batch_view(std::size_t slot, std::int64_t n) const {
  const torch::Tensor first = images(slot).narrow(0, 0, n);
  return planar_ ? first : first.permute({0, 3, 1, 2});
}

}  // namespace data_pipeline::gpu
