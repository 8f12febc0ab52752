// Multithreaded Food-101 loader: workers decode into a fixed ring of (optionally pinned) batch
// slots and the consumer takes the batches in order.
#pragma once

#include <torch/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "data_pipeline/batch_ring.h"
#include "data_pipeline/food101_index.h"
#include "data_pipeline/loader_options.h"
#include "data_pipeline/sample_reader.h"
#include "data_pipeline/slot_lease.h"

namespace data_pipeline {

/// What a delivered batch says about itself, whether on the host (Batch) or decoded on the device
/// (gpu::DeviceBatch): where it sits in the delivery order, its digest, the consumer's wait, the
/// images replaced, the dataset indices and, under --decode gpu, how each sample was staged.
class BatchInfo {
 public:
  std::int64_t size() const { return position_.count; }
  std::int64_t epoch() const { return position_.epoch; }
  std::int64_t index_in_epoch() const { return position_.index_in_epoch; }
  /// Position in the loader's delivery order since construction (monotonic across resets).
  std::int64_t sequence() const { return position_.sequence; }
  /// 64-bit digest of what the loader wrote for this batch: its labels and, per sample, the image
  /// bytes (or, for a sample staged for the GPU, the file's bytes, crop and flip); identical for
  /// identical batches.
  std::uint64_t digest() const { return digest_; }
  /// Time the consumer blocked in `next()` for this batch.
  std::chrono::nanoseconds wait() const { return wait_; }
  /// Images replaced under BadImagePolicy::kSkip in this batch, in sample order.
  const std::vector<SkippedImage>& skipped() const { return skipped_; }
  /// The dataset index of each sample, in order (a replaced image keeps its own index here).
  const std::vector<std::int64_t>& indices() const { return indices_; }
  /// --decode gpu: how each sample reaches the GPU stage, in order (empty for --decode cpu).
  const std::vector<StagedImage>& staged() const { return staged_; }

 protected:
  BatchPosition position_;
  std::uint64_t digest_ = 0;
  std::chrono::nanoseconds wait_{0};
  std::vector<SkippedImage> skipped_;
  std::vector<std::int64_t> indices_;
  std::vector<StagedImage> staged_;
};

/// A delivered batch: a lease on one ring slot (SlotLease).
///
/// `images()` (N x 3 x H x W, channels_last memory (NHWC) or contiguous NCHW per the options'
/// layout, float32 or uint8 per their dtype) and `labels()` (N int64) are views of the slot's
/// memory (no copy), valid until the lease is released. Release with `release_after(fence)` when
/// an asynchronous device copy may still read the slot (the writer that next fills it calls
/// `fence` first); `release()` only when no device copy still reads it; the destructor releases
/// without a fence. A Batch shares ownership of the ring, so it may outlive its Loader: its views
/// stay valid until it is released, and the ring (with its memory) goes when the Loader and the
/// last Batch have. Move-only; use from one thread at a time.
class Batch : public BatchInfo, public SlotLease<BatchRing> {
 public:
  Batch() = default;
  ~Batch() = default;
  Batch(Batch&& other) noexcept = default;
  Batch& operator=(Batch&& other) noexcept = default;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  /// Sample `k`'s area of the slot: its pixels, or a kHardware sample's staged bytes.
  const std::uint8_t* sample_area(std::int64_t k) const;
  /// Bytes of one sample's area.
  std::size_t sample_bytes() const { return sample_bytes_; }

 private:
  friend class Loader;
  std::size_t sample_bytes_ = 0;
};

/// Cumulative counters, readable at any time.
struct LoaderStats {
  std::int64_t batches_delivered = 0;
  std::int64_t samples_decoded = 0;
  std::int64_t images_skipped = 0;  ///< In every finished batch, delivered or decoded ahead.
  std::chrono::nanoseconds consumer_wait{0};
};

/// Delivers the batches of a split, in order, forever: epoch after epoch.
///
/// Epoch e's order is a permutation drawn from (seed, e); every random decision for dataset
/// image i in epoch e comes from a generator keyed by (seed, e, i) (`SampleReader`). Batches are
/// therefore bit-identical whatever the worker count, prefetch depth, pinning, work unit or
/// scheduling. With `shard_count` > 1 the loader reads one shard of each epoch's order, as
/// DistributedSampler does (see LoaderOptions), and an epoch is the shard's batches.
///
/// Memory: a `BatchRing` of `workers * prefetch_factor + 2` slots, allocated once in the
/// constructor, page-locked when `pin_memory` is set and CUDA is present. At most
/// `workers * prefetch_factor` batches are decoded ahead of the consumer (PyTorch's bound); the
/// two extra slots let the consumer hold the current batch while the previous one's copy is
/// still in flight. Holding more than two leases at once stalls prefetching.
///
/// Threads: `next()`, `reset()` and `stop()` are for one consumer thread; `cancel()` and `stats()`
/// may be called from any thread. Workers never let an exception escape: a failure is attached to
/// its batch and rethrown by `next()` when the consumer reaches that batch, with the file and the
/// batch named; the loader then stays failed. Workers are named `loader/<index>` for the OS and
/// NVTX, and put their ranges in the `data_pipeline` NVTX domain (data_pipeline/nvtx_domain.h).
///
/// Shutdown is bounded: `stop()` waits at most its timeout for the workers, and detaches one still
/// inside a call that does not return (a read on a hung filesystem), with a warning. What a worker
/// touches (the ring, the per-slot records, the epoch orders, the counters, the index, the file
/// reader) is owned jointly by the Loader and every worker, so a detached worker that wakes up
/// after the Loader is gone finds it all alive, sees its claim abandoned and exits.
class Loader {
 public:
  /// How long stop() (and so the destructor) waits for the workers by default: far longer than
  /// one sample takes (a read of at most max_image_mb, a decode of at most kMaxImagePixels).
  static constexpr std::chrono::milliseconds kStopTimeout{10000};

  /// Allocates the ring and starts the workers, which read image files with `read` (`read_file`;
  /// a test passes a stand-in, see FileReader). A detached worker may call `read` after the Loader
  /// is gone: it must not depend on anything the caller frees.
  /// \throws std::invalid_argument for invalid options; DataError when the split has fewer images
  ///         than one batch with drop_last; std::runtime_error when the ring cannot be allocated.
  Loader(std::shared_ptr<const Food101Index> index, LoaderOptions options,
         FileReader read = read_file);
  /// Stops the workers (see stop()). The ring lives on while a Batch (or a detached worker) holds
  /// it.
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  /// Blocks until the next batch in order is ready and leases its slot. Rolls over into the next
  /// epoch at the end of one. With workers == 0 the batch is decoded here, on the caller's thread.
  /// \throws DataError (bad image, with its path) or std::runtime_error (other worker failure);
  ///         Cancelled after cancel().
  Batch next();

  /// Starts a new traversal, like calling iter() on a PyTorch DataLoader again: the next batch is
  /// the first of a new epoch with a new permutation, and batches decoded ahead are discarded.
  /// The new epoch number is the one after the last epoch the consumer took a batch from (or
  /// after the current traversal's first epoch when it took none), so it does not depend on
  /// how far the workers had run ahead.
  void reset();
  /// reset(), with the new traversal starting at `epoch` rather than at the one the rule above
  /// picks: for a consumer that passes batches on and knows which its own consumer took (the GPU
  /// stage). \throws std::invalid_argument for a negative epoch.
  void reset_to(std::int64_t epoch);

  /// Makes a next() that is blocked, or called later, throw data_pipeline::Cancelled, and tells the
  /// workers to stop after the sample they are decoding. Safe to call from any thread (for
  /// instance a signal-handling thread) while the consumer is inside next(); does not join.
  void cancel();

  /// Stops the workers and joins them; they finish at most the sample they are decoding. Waits at
  /// most `timeout` in all: a worker still running then (stuck in I/O) is detached, with one line
  /// on stderr naming its thread and the file it is reading, and exits on its own when that call
  /// returns (see the class comment). Called by the destructor; explicit so a caller can stop
  /// decoding before releasing device resources. Leases still held stay valid until released.
  /// Idempotent.
  void stop(std::chrono::milliseconds timeout = kStopTimeout);

  const LoaderOptions& options() const { return options_; }
  std::int64_t batches_per_epoch() const { return ring_->batches_per_epoch(); }
  std::size_t ring_slots() const { return ring_->shape().slots; }
  std::size_t ring_bytes() const { return ring_->bytes(); }
  /// True when the ring is page-locked.
  bool pinned() const { return ring_->pinned(); }
  LoaderStats stats() const;

 private:
  class EpochOrders;
  // What the writers of one slot record per sample, besides the pixels and labels in the ring.
  struct SlotRecords {
    std::vector<std::uint64_t> digests;
    std::vector<std::optional<SkippedImage>> skipped;
    std::vector<StagedImage> staged;  // --decode gpu
  };

  // What the workers touch, shared with them (see the class comment); defined in loader.cpp.
  struct Shared;

  std::shared_ptr<const Food101Index> index_;
  LoaderOptions options_;
  std::size_t sample_bytes_ = 0;
  std::shared_ptr<BatchRing> ring_;
  std::shared_ptr<Shared> shared_;  // records, epoch orders, counters; the ring and index again
  std::atomic<std::int64_t> batches_delivered_{0};
  std::atomic<std::int64_t> consumer_wait_ns_{0};
  std::unique_ptr<SampleReader> inline_reader_;  // workers == 0
  std::vector<std::thread> threads_;
};

}  // namespace data_pipeline
