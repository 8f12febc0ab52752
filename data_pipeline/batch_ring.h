// The loader's ring: batch slots in one host block, and the bookkeeping of who may write, read and
// rewrite each slot (claim, finish, lease, release behind a reuse fence, reset).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "data_pipeline/host_block.h"
#include "data_pipeline/reuse_fence.h"
#include "data_pipeline/traversal_epochs.h"

namespace data_pipeline {

/// Where one batch sits in the endless delivery order.
struct BatchPosition {
  std::int64_t sequence = 0;  ///< Delivery order since construction; continues across resets.
  std::int64_t epoch = 0;
  std::int64_t index_in_epoch = 0;
  std::int64_t count = 0;  ///< Samples in the batch (an epoch's last batch may be short).
};

/// A writer's claim: samples [first, last) of the batch in `slot`.
struct RingClaim {
  std::size_t slot = 0;
  BatchPosition batch;
  std::uint64_t generation = 0;  ///< The traversal the claim belongs to (see reset()).
  std::int64_t first = 0;
  std::int64_t last = 0;
  bool opener = false;  ///< This claim began the fill: it waits the slot's reuse fence.
};

/// A ready batch leased to the consumer; its slot is not rewritten until released.
struct RingLease {
  std::size_t slot = 0;
  BatchPosition batch;
};

/// Dimensions of a ring and of the traversal it delivers.
struct RingShape {
  std::size_t slots = 0;   ///< Slots in the ring, > ahead.
  std::int64_t ahead = 0;  ///< Batches claimed ahead of the consumer, at most (0: inline only).
  std::int64_t batch_size = 0;
  std::int64_t dataset_size = 0;
  bool drop_last = true;             ///< Drop an epoch's last, short batch.
  bool whole_batches = true;         ///< A claim covers a whole batch; false: one sample.
  std::size_t slot_image_bytes = 0;  ///< Image bytes per slot (batch_size samples).
  bool pin_memory = false;           ///< Page-locked block (when CUDA is present).
};

/// A fixed ring of batch slots, allocated once in one host block (images of every slot, then
/// labels), and the state machine that hands them out:
///
///   kFree --claim--> kFilling --every sample finished--> kReady --acquire--> kLeased
///     ^                                                                          |
///     +--------------------------- release (fence kept for the next fill) ------+
///
/// Ordering: batch number `s` (its sequence) always lives in slot `s % slots`. Writers claim
/// sequences in increasing order and at most `ahead` beyond the consumer's next one (PyTorch's
/// bound on batches in flight); the consumer takes them strictly in order. With `ahead` <= slots -
/// 2 the consumer can hold the current batch while the previous one's copy is still in flight;
/// holding more leases stalls prefetching, never corrupts it.
///
/// Why two live batches never share a slot: a claim for sequence `s` begins only when slot `s %
/// slots` is kFree. A slot leaves kFree only through that claim and returns to it only when its
/// batch is released (after its lease) or abandoned (after a reset, once its last writer has left,
/// or when its batch failed). So the sequences that map to one slot (s, s + slots, s + 2 slots,
/// ...) occupy it one after the other, never together; the generation stamped on a fill tells a
/// batch of the current traversal from one abandoned by reset(), whose writers may still be
/// running.
///
/// Reuse: a released slot keeps the fence its consumer gave; the claim that next fills it (the
/// opener) waits the fence before any writer of that batch touches the memory, so an asynchronous
/// device copy from the slot is never overwritten while it runs.
///
/// Shutdown: stop() wakes every waiter; claim() then returns nothing and acquire() throws.
/// cancel() also makes acquire() throw Cancelled. The destructor waits the fences of released
/// slots (the device may still read them) before freeing the block.
///
/// Thread-safety: every member function may be called from any thread; writers use claim(),
/// open(), live() and finish(), the consumer (one thread) claim_inline(), acquire() and reset(),
/// any lease holder release(). Slot memory is written only under a claim and read only under a
/// lease.
class BatchRing {
 public:
  /// Allocates the block. \throws std::invalid_argument for an inconsistent shape (including a
  /// dataset smaller than one batch with drop_last); std::runtime_error or std::bad_alloc when the
  /// memory cannot be had.
  explicit BatchRing(const RingShape& shape);
  ~BatchRing();
  BatchRing(const BatchRing&) = delete;
  BatchRing& operator=(const BatchRing&) = delete;

  const RingShape& shape() const { return shape_; }
  std::int64_t batches_per_epoch() const { return batches_per_epoch_; }
  std::size_t bytes() const { return block_.size(); }
  bool pinned() const { return block_.page_locked(); }
  std::uint8_t* images(std::size_t slot) const;
  std::int64_t* labels(std::size_t slot) const;

  // --- writers ---

  /// Blocks until the next claim can be made; nothing once stopped or failed.
  std::optional<RingClaim> claim();
  /// The next claim if one can be made now.
  std::optional<RingClaim> try_claim();
  /// Readies the claimed slot for writing: the opener waits the slot's reuse fence (outside the
  /// lock; a fence that throws fails the batch), the other writers of the batch wait for the
  /// opener. Returns at once when the claim goes stale meanwhile. Always follow with finish().
  void open(const RingClaim& claim);
  /// True while the claim is wanted: no reset() or stop() since it was made. Lock-free, for
  /// writers to poll between samples.
  bool live(const RingClaim& claim) const;
  /// Ends a claim, with the error that cut it short if any (`context` says where). Returns true
  /// when the claim counted toward its batch, false when it was stale (its samples are dropped).
  bool finish(const RingClaim& claim, std::exception_ptr error = nullptr,
              const std::string& context = {});
  /// Fails the ring outside any batch (e.g. a writer could not start): acquire() rethrows it.
  void fail(std::exception_ptr error);

  // --- consumer ---

  /// Claims the whole next batch for the consumer itself (no writer threads). The consumer then
  /// opens, writes and finishes it like a writer, and acquires it.
  /// \throws std::logic_error when its slot is still leased (hold at most one earlier batch).
  RingClaim claim_inline();
  /// Blocks until the next batch in order is ready and leases it.
  /// \throws Cancelled after cancel(); the batch's error, prefixed with "loader (<context>): " and
  ///         as a DataError when it was one, after which the ring stays failed and every later
  ///         call throws the same; std::logic_error after stop().
  RingLease acquire();
  /// Returns a leased slot; the writer that next fills it calls `fence` first (may be empty).
  void release(std::size_t slot, ReuseFence fence);
  /// Starts a new traversal: the next batch is the first of a new epoch, the one after the last
  /// epoch the consumer took a batch from (or after the traversal's first epoch if it took none),
  /// so it does not depend on how far the writers had run ahead (TraversalEpochs). Batches
  /// claimed before are abandoned; their slots return as their writers notice. With `epoch`, the
  /// new traversal starts at that epoch instead.
  void reset(std::optional<std::int64_t> epoch = std::nullopt);
  /// Wakes every waiter and refuses further claims. Idempotent.
  void stop();
  /// stop(), and acquire() throws Cancelled from now on. Any thread, e.g. a signal handler's.
  void cancel();

 private:
  enum class SlotState { kFree, kFilling, kReady, kLeased };
  struct Slot {
    SlotState state = SlotState::kFree;
    BatchPosition batch;
    std::uint64_t generation = 0;
    std::int64_t pending = 0;  // samples not yet finished
    int writers = 0;           // claims held on this slot
    bool open = false;         // the reuse fence was waited for this fill
    ReuseFence fence;          // from the last release; waited before the next fill
    std::exception_ptr error;
    std::string error_context;
  };

  std::optional<RingClaim> try_claim_locked();          // mu_ held
  void begin_fill(Slot& slot, std::int64_t sequence);   // mu_ held
  RingClaim make_claim(std::size_t slot, bool opener);  // mu_ held
  [[noreturn]] void throw_unusable_locked() const;      // mu_ held

  const RingShape shape_;
  std::int64_t batches_per_epoch_ = 0;
  std::size_t labels_offset_ = 0;  // the labels follow every slot's images
  std::size_t slot_label_bytes_ = 0;
  HostBlock block_;
  std::vector<Slot> slots_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // writers: claimable work, an opened slot, stop
  std::condition_variable ready_cv_;  // consumer: a batch became ready or failed, stop
  bool stopping_ = false;
  bool cancelled_ = false;
  std::exception_ptr failure_;                     // the ring is unusable from now on
  std::uint64_t generation_ = 0;                   // bumped by reset()
  std::atomic<std::uint64_t> live_generation_{0};  // copies of generation_ and stopping_ that
  std::atomic<bool> live_stopping_{false};         // writers poll without the lock
  std::int64_t traversal_base_ = 0;                // sequence of the traversal's first batch
  TraversalEpochs epochs_;                         // the traversal's first epoch, the last taken
  std::int64_t consume_seq_ = 0;                   // next sequence the consumer takes
  std::int64_t claim_seq_ = 0;                     // next sequence a writer claims
  std::int64_t claim_sample_ = 0;                  // next sample of claim_seq_ (one-sample claims)
};

}  // namespace data_pipeline
