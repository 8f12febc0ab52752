// The GPU decode stage's output: a fixed pool of device batch buffers (OutputPool) and the lease on
// one of them the consumer gets (DeviceBatch).
#pragma once

#include <cuda_runtime_api.h>
#include <torch/types.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "data_pipeline/gpu/cuda_resources.h"
#include "data_pipeline/loader.h"
#include "data_pipeline/reuse_fence.h"
#include "data_pipeline/slot_lease.h"

namespace data_pipeline::gpu {

/// The output buffers: a fixed pool of device batches (images, labels and a ready event each),
/// allocated once. Each buffer is free, written by the stage, or leased to the consumer. A released
/// buffer keeps its consumer's fence; acquire() waits it before the stage writes the buffer again,
/// so the stage's lead over the device's reads is bounded by the pool's size.
///
/// Shutdown: stop() wakes a blocked acquire(), which then returns nothing. The destructor waits
/// the fences of released buffers (the device may still read them) before freeing them.
///
/// Thread-safety: acquire() is for the stage's thread; release() for any lease holder; stop() any
/// thread. The tensors and events of a buffer are used only by whoever holds it.
class OutputPool {
 public:
  /// `slots` buffers of `batch_size` images of `image_size`^2 x 3 (float32 or uint8; NCHW when
  /// `planar`, else NHWC) and as many int64 labels, on CUDA device `device`.
  OutputPool(int slots, std::int64_t batch_size, int image_size, bool float32, bool planar,
             int device);
  ~OutputPool();
  OutputPool(const OutputPool&) = delete;
  OutputPool& operator=(const OutputPool&) = delete;

  /// Blocks for a free buffer, takes it and waits its fence (outside the lock, in a `reuse_fence`
  /// range); nothing once stopped. \throws what the fence throws.
  std::optional<std::size_t> acquire();
  /// Returns a taken buffer; the next acquire() of it calls `fence` first (may be empty).
  void release(std::size_t slot, ReuseFence fence);
  /// Wakes a blocked acquire() and makes every later one return nothing. Idempotent.
  void stop();

  const torch::Tensor& images(std::size_t slot) const { return slots_[slot].images; }
  const torch::Tensor& labels(std::size_t slot) const { return slots_[slot].labels; }
  CudaEvent& ready(std::size_t slot) { return *slots_[slot].ready; }
  /// The first `n` images of a buffer as N x 3 x S x S (channels_last or contiguous NCHW).
  torch::Tensor batch_view(std::size_t slot, std::int64_t n) const;

 private:
  struct Slot {
    torch::Tensor images;  // N x S x S x 3, or N x 3 x S x S when planar
    torch::Tensor labels;
    std::unique_ptr<CudaEvent> ready;
    bool busy = false;  // taken by the stage or leased to the consumer
    ReuseFence fence;   // from the last release; waited by the next acquire()
  };
  std::optional<std::size_t> first_free_locked() const;  // mu_ held

  bool planar_ = false;  // buffers are N x 3 x S x S (NCHW), else N x S x S x 3
  std::vector<Slot> slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

/// A decoded batch on the device: a lease on one of the stage's output buffers (SlotLease).
///
/// `images()` (N x 3 x S x S, channels_last or NCHW per the options' layout, float32 or uint8 per
/// their dtype) and `labels()` are device tensors written on the stage's stream; make the reading
/// stream wait `ready()` first. The BatchInfo is the loader's batch's: its digest covers what the
/// stage was given (per sample the file's bytes, crop and flip, or the CPU path's pixels), so it is
/// identical across loader settings; `staged()` has each sample's crop window and flip.
/// Release with `release_after(fence)` once the reading work is queued, where `fence` blocks until
/// it has run (e.g. a CUDA event synchronize): the stage calls it before writing the buffer
/// again. The destructor releases without a fence. Move-only; one thread at a time.
class DeviceBatch : public BatchInfo, public SlotLease<OutputPool> {
 public:
  DeviceBatch() = default;
  ~DeviceBatch() = default;
  DeviceBatch(DeviceBatch&& other) noexcept = default;
  DeviceBatch& operator=(DeviceBatch&& other) noexcept = default;
  DeviceBatch(const DeviceBatch&) = delete;
  DeviceBatch& operator=(const DeviceBatch&) = delete;

  /// Recorded on the stage's stream after the batch was written.
  cudaEvent_t ready() const { return ready_; }
  std::int64_t hardware_images() const { return hardware_images_; }
  std::int64_t fallback_images() const { return size() - hardware_images_; }

 private:
  friend class GpuDecoder;    // sets the consumer's wait
  friend class BatchDecoder;  // writes the batch
  cudaEvent_t ready_ = nullptr;
  std::int64_t hardware_images_ = 0;
};

}  // namespace data_pipeline::gpu
