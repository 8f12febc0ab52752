// A lease on one slot of a pool of batch buffers and the tensors that view it: the ownership, move
// and release code that Batch (the loader's ring) and gpu::DeviceBatch (the GPU stage's output
// pool) share.
#pragma once

#include <torch/types.h>

#include <cstddef>
#include <memory>
#include <utility>

#include "data_pipeline/reuse_fence.h"

namespace data_pipeline {

/// Holds slot `slot_` of an `Owner` and the `images_` / `labels_` tensors that view it, until it is
/// released: releasing drops the views, then returns the slot with `Owner::release(std::size_t
/// slot, ReuseFence fence)`. Shares ownership of the owner, so a lease may outlive whoever handed
/// it out; the owner goes with its last holder.
///
/// A base of the batch types only (protected construction; the types that hand leases out set the
/// members). Move-only; one thread at a time. The destructor releases without a fence.
template <typename Owner>
class SlotLease {
 public:
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;

  /// True while the slot is held.
  bool valid() const { return owner_ != nullptr; }
  /// Views of the slot (empty once released); the batch type says their shape and device.
  const torch::Tensor& images() const { return images_; }
  const torch::Tensor& labels() const { return labels_; }

  /// Returns the slot now: only when no device work still reads it.
  void release() { release_after(nullptr); }
  /// Returns the slot; whoever next writes it calls `fence` first. Does nothing once released.
  void release_after(ReuseFence fence) {
    if (!owner_) return;
    images_ = torch::Tensor();
    labels_ = torch::Tensor();
    owner_->release(slot_, std::move(fence));
    owner_.reset();
  }

 protected:
  SlotLease() = default;
  ~SlotLease() { release(); }
  SlotLease(SlotLease&& other) noexcept { *this = std::move(other); }
  /// Releases the slot held, then takes over `other`'s.
  SlotLease& operator=(SlotLease&& other) noexcept {
    if (this != &other) {
      release();
      owner_ = std::move(other.owner_);
      slot_ = other.slot_;
      images_ = std::move(other.images_);
      labels_ = std::move(other.labels_);
    }
    return *this;
  }

  std::shared_ptr<Owner> owner_;  // null: nothing held
  std::size_t slot_ = 0;
  torch::Tensor images_;
  torch::Tensor labels_;
};

}  // namespace data_pipeline
