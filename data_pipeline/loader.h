// Multithreaded Food-101 loader: workers decode into a fixed ring of (optionally pinned) batch
// slots.
#pragma once

#include <torch/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data_pipeline/food101_index.h"
#include "data_pipeline/host_block.h"
#include "data_pipeline/sample_transform.h"

namespace data_pipeline {

/// What one worker claims at a time.
enum class WorkUnit {
  kBatch,   ///< A worker assembles a whole batch, as PyTorch's DataLoader workers do.
  kSample,  ///< All workers fill the next batch together, one sample at a time.
};

/// What to do with an image that cannot be read or decoded.
enum class BadImagePolicy {
  kError,  ///< The batch fails; `Loader::next` throws a DataError naming the file.
  kSkip,   ///< Replace it with another image of the split, chosen deterministically.
};

const char* to_string(WorkUnit unit);
const char* to_string(BadImagePolicy policy);

/// Loader settings. Defaults are the article's DataLoader settings.
struct LoaderOptions {
  std::int64_t batch_size = 128;
  int workers = 8;          ///< Worker threads; 0 decodes on the consumer thread inside next().
  int prefetch_factor = 2;  ///< Batches per worker decoded ahead (PyTorch's meaning).
  bool pin_memory = true;   ///< Page-locked slots when CUDA is present.
  WorkUnit work_unit = WorkUnit::kBatch;
  bool drop_last = true;
  bool shuffle = true;
  std::uint64_t seed = 2026;
  TransformOptions transform;
  BadImagePolicy on_bad_image = BadImagePolicy::kError;
  std::string thread_name_prefix = "loader/";  ///< Workers are named prefix + index.
};

/// An image the loader replaced under BadImagePolicy::kSkip.
struct SkippedImage {
  std::string path;
  std::string reason;
  std::int64_t epoch = 0;
  std::int64_t dataset_index = 0;
  std::string replacement;  ///< Path of the image used in its place.
};

/// Blocks until the device no longer reads a released slot (e.g. a CUDA event synchronize).
/// Called on a worker thread, outside the loader's lock, before the slot is written again.
using ReuseFence = std::function<void()>;

class Loader;

/// A delivered batch: a lease on one ring slot.
///
/// `images()` and `labels()` are views of the slot's memory (no copy) and are valid only until the
/// lease is released. Release with `release_after(fence)` when an asynchronous device copy may
/// still read the slot; the destructor releases without a fence. Move-only; use from the
/// consumer thread.
class Batch {
 public:
  Batch() = default;
  ~Batch();
  Batch(Batch&& other) noexcept;
  Batch& operator=(Batch&& other) noexcept;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  bool valid() const { return loader_ != nullptr; }
  /// N x 3 x H x W, channels_last memory (NHWC), float32 or uint8 per the options.
  const torch::Tensor& images() const { return images_; }
  /// N int64 labels.
  const torch::Tensor& labels() const { return labels_; }
  std::int64_t size() const { return size_; }
  std::int64_t epoch() const { return epoch_; }
  std::int64_t index_in_epoch() const { return index_in_epoch_; }
  /// Position in the loader's delivery order since construction (monotonic across resets).
  std::int64_t sequence() const { return sequence_; }
  /// 64-bit digest of this batch's label and image bytes; identical for identical batches.
  std::uint64_t digest() const { return digest_; }
  /// Time the consumer blocked inside `Loader::next()` for this batch.
  std::chrono::nanoseconds wait() const { return wait_; }
  /// Images replaced under BadImagePolicy::kSkip in this batch.
  const std::vector<SkippedImage>& skipped() const { return skipped_; }

  /// Returns the slot to the ring now: only when no device copy still reads it.
  void release();
  /// Returns the slot; a worker calls `fence` before writing into it again.
  void release_after(ReuseFence fence);

 private:
  friend class Loader;
  Loader* loader_ = nullptr;
  std::size_t slot_ = 0;
  torch::Tensor images_;
  torch::Tensor labels_;
  std::int64_t size_ = 0;
  std::int64_t epoch_ = 0;
  std::int64_t index_in_epoch_ = 0;
  std::int64_t sequence_ = 0;
  std::uint64_t digest_ = 0;
  std::chrono::nanoseconds wait_{0};
  std::vector<SkippedImage> skipped_;
};

/// Cumulative counters, readable at any time.
struct LoaderStats {
  std::int64_t batches_delivered = 0;
  std::int64_t samples_decoded = 0;
  std::int64_t images_skipped = 0;
  std::chrono::nanoseconds consumer_wait{0};
};

/// Delivers the batches of a split, in order, forever: epoch after epoch.
///
/// Epoch e's order is a permutation drawn from (seed, e); every random decision for dataset
/// image i in epoch e comes from a generator keyed by (seed, e, i). Batches are therefore
/// bit-identical whatever the worker count, prefetch depth, pinning, work unit or scheduling.
///
/// Memory: a ring of `workers * prefetch_factor + 2` slots (images + labels), allocated once in
/// the constructor, page-locked when `pin_memory` is set and CUDA is present. At most
/// `workers * prefetch_factor` batches are decoded ahead of the consumer (PyTorch's bound); the
/// two extra slots let the consumer hold the current batch while the previous one's copy is
/// still in flight. Holding more than two leases at once stalls prefetching.
///
/// Threads: `next()`, `reset()` and `stop()` are for one consumer thread; `cancel()` and `stats()`
/// may be called from any thread. Workers never let an
/// exception escape: a failure is attached to its batch and rethrown by `next()` when the
/// consumer reaches that batch, with the file and the worker named; the loader then stays
/// failed. Workers are named `<prefix><index>` for the OS and NVTX.
class Loader {
 public:
  /// Allocates the ring and starts the workers.
  /// \throws std::invalid_argument for invalid options; DataError when the split has fewer images
  ///         than one batch with drop_last.
  Loader(std::shared_ptr<const Food101Index> index, LoaderOptions options);
  /// Stops and joins the workers (see stop()), then frees the ring.
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  /// Blocks until the next batch in order is ready and leases its slot. Rolls over into the next
  /// epoch at the end of one. With workers == 0 the batch is decoded here, on the caller's thread.
  /// \throws DataError (bad image, with its path) or std::runtime_error (other worker failure).
  Batch next();

  /// Starts a new traversal, like calling iter() on a PyTorch DataLoader again: the next batch is
  /// the first of a new epoch with a new permutation, and batches decoded ahead are discarded.
  /// The new epoch number is the one after the last epoch the consumer took a batch from (or
  /// after the current traversal's first epoch when it took none), so it does not depend on
  /// how far the workers had run ahead.
  void reset();

  /// Makes a next() that is blocked, or called later, throw data_pipeline::Cancelled, and tells the
  /// workers to stop after the sample they are decoding. Safe to call from any thread (for
  /// instance a signal-handling thread) while the consumer is inside next(); does not join.
  void cancel();

  /// Stops the workers and joins them; they finish at most the sample they are decoding. Called
  /// by the destructor; explicit so a caller can stop decoding before releasing device resources.
  /// Leases still held stay valid until released. Idempotent.
  void stop();

  const LoaderOptions& options() const { return options_; }
  std::int64_t batches_per_epoch() const { return batches_per_epoch_; }
  std::size_t ring_slots() const { return slots_.size(); }
  std::size_t ring_bytes() const { return block_.size(); }
  /// True when the ring is page-locked.
  bool pinned() const { return block_.page_locked(); }
  LoaderStats stats() const;

 private:
  friend class Batch;
  enum class SlotState { kFree, kFilling, kReady, kLeased };
  struct Slot;
  struct Item;

  void worker_main(int worker);
  bool try_claim(Item& item);                          // mu_ held
  void begin_fill(Slot& slot, std::int64_t sequence);  // mu_ held
  void open_slot(Slot& slot, const Item& item, std::unique_lock<std::mutex>& lock);
  void fill(SampleTransform& transform, const Item& item);
  void finish_item(const Item& item, std::int64_t done, std::exception_ptr error,
                   const std::string& context, std::vector<SkippedImage> skipped);  // takes mu_
  void release_slot(std::size_t slot, ReuseFence fence);
  std::shared_ptr<const std::vector<std::int64_t>> permutation(std::int64_t epoch);  // mu_ held

  std::shared_ptr<const Food101Index> index_;
  LoaderOptions options_;
  std::int64_t batches_per_epoch_ = 0;
  std::int64_t ahead_ = 0;  // batches decoded ahead of the consumer, at most
  std::size_t sample_bytes_ = 0;
  HostBlock block_;
  std::vector<std::unique_ptr<Slot>> slots_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // workers: claimable work, open slots, stop
  std::condition_variable ready_cv_;  // consumer: a batch became ready or failed
  bool stopping_ = false;
  std::uint64_t generation_ = 0;                   // bumped by reset(); stale work is discarded
  std::atomic<std::uint64_t> live_generation_{0};  // copies of generation_ and stopping_ that
  std::atomic<bool> live_stopping_{false};         // workers poll between samples without mu_
  std::int64_t traversal_base_ = 0;                // sequence number of the traversal's first batch
  std::int64_t traversal_epoch_ = 0;               // epoch of the traversal's first batch
  std::int64_t last_consumed_epoch_ = -1;
  std::int64_t consume_seq_ = 0;   // next sequence number the consumer takes
  std::int64_t claim_seq_ = 0;     // next sequence number a worker claims
  std::int64_t claim_sample_ = 0;  // next sample of claim_seq_ (kSample)
  std::exception_ptr failure_;     // set once the consumer met a failed batch
  bool cancelled_ = false;         // cancel() was called
  std::vector<std::pair<std::int64_t, std::shared_ptr<const std::vector<std::int64_t>>>> perms_;
  LoaderStats stats_;

  std::unique_ptr<SampleTransform> inline_transform_;  // workers == 0
  std::vector<std::thread> threads_;
};

}  // namespace data_pipeline
