// The loader's ring: slot memory and the claim / finish / lease / release / reset state machine.
#include "data_pipeline/batch_ring.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "common/align.h"
#include "data_pipeline/data_error.h"
#include "data_pipeline/nvtx_domain.h"

namespace data_pipeline {

BatchRing::BatchRing(const RingShape& shape) : shape_(shape) {
  if (shape_.batch_size < 1) {
    throw std::invalid_argument("batch_size: expected >= 1, got " +
                                std::to_string(shape_.batch_size));
  }
  if (shape_.ahead < 0 || shape_.slots < static_cast<std::size_t>(shape_.ahead) + 1) {
    throw std::invalid_argument("ring: expected 0 <= ahead < slots, got ahead " +
                                std::to_string(shape_.ahead) + " and " +
                                std::to_string(shape_.slots) + " slots");
  }
  const std::int64_t n = shape_.dataset_size;
  const std::int64_t b = shape_.batch_size;
  batches_per_epoch_ = shape_.drop_last ? n / b : (n + b - 1) / b;
  if (batches_per_epoch_ < 1) {
    throw std::invalid_argument("ring: a dataset of " + std::to_string(n) +
                                " images holds no batch of " + std::to_string(b));
  }
  const std::size_t image_bytes = common::align_up(shape_.slot_image_bytes);
  slot_label_bytes_ = common::align_up(sizeof(std::int64_t) * static_cast<std::size_t>(b));
  labels_offset_ = shape_.slots * image_bytes;
  block_ = HostBlock(shape_.slots * (image_bytes + slot_label_bytes_), shape_.pin_memory);
  slots_.resize(shape_.slots);
}

BatchRing::~BatchRing() {
  stop();
  // A released slot may still be the source of a device copy: wait before freeing the block.
  wait_released_fences(slots_);
}

std::uint8_t* BatchRing::images(std::size_t slot) const {
  return static_cast<std::uint8_t*>(block_.data()) +
         slot * common::align_up(shape_.slot_image_bytes);
}

std::int64_t* BatchRing::labels(std::size_t slot) const {
  return reinterpret_cast<std::int64_t*>(static_cast<std::uint8_t*>(block_.data()) +
                                         labels_offset_ + slot * slot_label_bytes_);
}

void BatchRing::begin_fill(Slot& slot, std::int64_t sequence) {
  const std::int64_t position = sequence - traversal_base_;
  slot.state = SlotState::kFilling;
  slot.batch.sequence = sequence;
  slot.batch.epoch = epochs_.first() + position / batches_per_epoch_;
  slot.batch.index_in_epoch = position % batches_per_epoch_;
  slot.batch.count = std::min(shape_.batch_size,
                              shape_.dataset_size - slot.batch.index_in_epoch * shape_.batch_size);
  slot.generation = generation_;
  slot.pending = slot.batch.count;
  slot.writers = 0;
  slot.open = false;
  slot.error = nullptr;
  slot.error_context.clear();
}

RingClaim BatchRing::make_claim(std::size_t idx, bool opener) {
  Slot& slot = slots_[idx];
  RingClaim c;
  c.slot = idx;
  c.batch = slot.batch;
  c.generation = generation_;
  c.opener = opener;
  c.first = claim_sample_;
  c.last = shape_.whole_batches ? slot.batch.count : claim_sample_ + 1;
  if (c.last >= slot.batch.count) {
    ++claim_seq_;
    claim_sample_ = 0;
  } else {
    claim_sample_ = c.last;
  }
  ++slot.writers;
  return c;
}

std::optional<RingClaim> BatchRing::try_claim_locked() {
  if (stopping_ || failure_) return std::nullopt;
  const std::int64_t seq = claim_seq_;
  if (seq >= consume_seq_ + shape_.ahead) return std::nullopt;  // the bound on batches in flight
  const std::size_t idx = static_cast<std::size_t>(seq) % slots_.size();
  bool opener = false;
  if (claim_sample_ == 0) {
    // The slot still holds an earlier batch (leased, or abandoned with writers still in it).
    if (slots_[idx].state != SlotState::kFree) return std::nullopt;
    begin_fill(slots_[idx], seq);
    opener = true;
  }
  return make_claim(idx, opener);
}

std::optional<RingClaim> BatchRing::try_claim() {
  std::lock_guard<std::mutex> lock(mu_);
  return try_claim_locked();
}

std::optional<RingClaim> BatchRing::claim() {
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<RingClaim> c;
  work_cv_.wait(lock, [&] {
    if (stopping_ || failure_) return true;
    c = try_claim_locked();
    return c.has_value();
  });
  return c;
}

void BatchRing::open(const RingClaim& claim) {
  std::unique_lock<std::mutex> lock(mu_);
  Slot& slot = slots_[claim.slot];
  if (!claim.opener) {
    work_cv_.wait(lock, [&] { return slot.open || stopping_ || slot.generation != generation_; });
    return;
  }
  ReuseFence fence = std::exchange(slot.fence, nullptr);
  if (fence) {
    lock.unlock();
    std::exception_ptr error;
    {
      nvtx::ScopedRange range(nvtx::kReuseFence);
      try {
        fence();
      } catch (...) {
        error = std::current_exception();
      }
    }
    lock.lock();
    if (error && !slot.error) {
      slot.error = error;
      slot.error_context = "waiting for the device to release the slot";
    }
  }
  slot.open = true;
  work_cv_.notify_all();
}

bool BatchRing::live(const RingClaim& claim) const {
  return live_generation_.load(std::memory_order_relaxed) == claim.generation &&
         !live_stopping_.load(std::memory_order_relaxed);
}

bool BatchRing::finish(const RingClaim& claim, std::exception_ptr error,
                       const std::string& context) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = slots_[claim.slot];
  --slot.writers;
  if (slot.generation != generation_ || stopping_) {
    // Abandoned by reset() or shutting down: the last writer out returns the slot.
    if (slot.writers == 0 && slot.state == SlotState::kFilling) {
      slot.state = SlotState::kFree;
      work_cv_.notify_all();
    }
    return false;
  }
  if (error && !slot.error) {
    slot.error = std::move(error);
    slot.error_context = context;
  }
  slot.pending -= claim.last - claim.first;
  if (slot.pending == 0) {
    slot.state = SlotState::kReady;
    ready_cv_.notify_all();
  }
  return true;
}

void BatchRing::fail(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_) failure_ = std::move(error);
  }
  work_cv_.notify_all();
  ready_cv_.notify_all();
}

void BatchRing::throw_unusable_locked() const {
  if (cancelled_) throw Cancelled();
  if (failure_) std::rethrow_exception(failure_);
  throw std::logic_error("BatchRing: used after stop()");
}

RingClaim BatchRing::claim_inline() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || failure_) throw_unusable_locked();
  const std::int64_t seq = consume_seq_;
  const std::size_t idx = static_cast<std::size_t>(seq) % slots_.size();
  if (slots_[idx].state != SlotState::kFree) {
    throw std::logic_error(
        "Loader::next: with workers=0 the consumer may hold at most one earlier batch");
  }
  Slot& slot = slots_[idx];
  begin_fill(slot, seq);
  ++slot.writers;
  claim_seq_ = seq + 1;
  claim_sample_ = 0;
  RingClaim c;
  c.slot = idx;
  c.batch = slot.batch;
  c.generation = generation_;
  c.first = 0;
  c.last = slot.batch.count;  // the consumer fills the whole batch, whatever the claim unit
  c.opener = true;
  return c;
}

RingLease BatchRing::acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_ || failure_) throw_unusable_locked();
  const std::int64_t seq = consume_seq_;
  const std::size_t idx = static_cast<std::size_t>(seq) % slots_.size();
  Slot& slot = slots_[idx];
  ready_cv_.wait(lock, [&] {
    return stopping_ || failure_ ||
           (slot.state == SlotState::kReady && slot.batch.sequence == seq &&
            slot.generation == generation_);
  });
  if (stopping_ || failure_) throw_unusable_locked();

  if (slot.error) {
    // Say where it happened, keep the type that tells data errors from the rest, and leave the
    // ring failed so that every later call says the same.
    std::string what;
    bool data_error = false;
    try {
      std::rethrow_exception(slot.error);
    } catch (const DataError& e) {
      what = e.what();
      data_error = true;
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
      what = "unknown exception";
    }
    const std::string message = "loader (" + slot.error_context + "): " + what;
    failure_ = data_error ? std::make_exception_ptr(DataError(message))
                          : std::make_exception_ptr(std::runtime_error(message));
    slot.state = SlotState::kFree;
    lock.unlock();
    work_cv_.notify_all();
    std::rethrow_exception(failure_);
  }

  slot.state = SlotState::kLeased;
  ++consume_seq_;
  epochs_.taken(slot.batch.epoch);
  const RingLease lease{idx, slot.batch};
  lock.unlock();
  work_cv_.notify_all();  // the bound on batches in flight moved
  return lease;
}

void BatchRing::release(std::size_t idx, ReuseFence fence) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& slot = slots_[idx];
    if (slot.state != SlotState::kLeased) {
      throw std::logic_error("BatchRing::release: slot " + std::to_string(idx) + " is not leased");
    }
    slot.state = SlotState::kFree;
    slot.fence = std::move(fence);
  }
  work_cv_.notify_all();
}

void BatchRing::reset(std::optional<std::int64_t> epoch) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    epochs_.start_next(epoch);
    ++generation_;
    live_generation_.store(generation_, std::memory_order_relaxed);
    // Keep the sequence (and so the slot mapping) continuous: batches claimed for the old
    // traversal are abandoned, and their slots return as their writers notice.
    traversal_base_ = consume_seq_;
    claim_seq_ = consume_seq_;
    claim_sample_ = 0;
    for (auto& slot : slots_) {
      if (slot.generation == generation_) continue;
      if ((slot.state == SlotState::kFilling || slot.state == SlotState::kReady) &&
          slot.writers == 0) {
        slot.state = SlotState::kFree;
      }
    }
  }
  work_cv_.notify_all();
}

void BatchRing::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    live_stopping_.store(true, std::memory_order_relaxed);
  }
  work_cv_.notify_all();
  ready_cv_.notify_all();
}

void BatchRing::cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  stop();
}

}  // namespace data_pipeline
