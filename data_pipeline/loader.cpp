// Multithreaded Food-101 loader: worker threads fill the ring's claims; the consumer takes batches.
#include "data_pipeline/loader.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <numeric>
#include <opencv2/core.hpp>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/hash64.h"
#include "data_pipeline/counter_rng.h"
#include "data_pipeline/data_error.h"
#include "data_pipeline/nvtx_domain.h"

namespace data_pipeline {

// ---------------------------------------------------------------------------------------------
// Batch

const std::uint8_t* Batch::sample_area(std::int64_t k) const {
  if (!owner_ || k < 0 || k >= position_.count) {
    throw std::out_of_range("Batch::sample_area: sample " + std::to_string(k) + " of a batch of " +
                            std::to_string(position_.count));
  }
  return owner_->images(slot_) + static_cast<std::size_t>(k) * sample_bytes_;
}

// ---------------------------------------------------------------------------------------------
// Epoch orders: the dataset indices this loader reads in epoch e, in order. Epoch e's permutation
// of the split is drawn from (seed, e); with shards it is padded with its head to a multiple of the
// shard count (DistributedSampler with drop_last=False) and this shard takes every shard-count-th
// index from its own on. Thread-safe; keeps the few most recent epochs (writers work on at most two
// at a time, the consumer's and the next).

class Loader::EpochOrders {
 public:
  EpochOrders(std::int64_t size, const LoaderOptions& options)
      : size_(size),
        seed_(options.seed),
        shuffle_(options.shuffle),
        shard_count_(options.shard_count),
        shard_index_(options.shard_index),
        shard_images_(epoch_images(size, options)) {}

  std::shared_ptr<const std::vector<std::int64_t>> get(std::int64_t epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [e, p] : cache_) {
      if (e == epoch) return p;
    }
    std::vector<std::int64_t> perm(static_cast<std::size_t>(size_));
    std::iota(perm.begin(), perm.end(), std::int64_t{0});
    if (shuffle_) {
      CounterRng rng(seed_, static_cast<std::uint64_t>(epoch), 0, CounterRng::kPermutation);
      for (std::size_t i = perm.size() - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
    }
    auto order = std::make_shared<std::vector<std::int64_t>>();
    if (shard_count_ == 1) {
      *order = std::move(perm);
    } else {
      // Padded: positions past the split's end wrap to its head; unpadded, there are none.
      order->reserve(static_cast<std::size_t>(shard_images_));
      for (std::int64_t j = 0; j < shard_images_; ++j) {
        const std::int64_t padded =
            shard_index_ + j * shard_count_;  // position in the padded order
        order->push_back(perm[static_cast<std::size_t>(padded % size_)]);
      }
    }
    cache_.emplace_back(epoch, order);
    if (cache_.size() > 4) cache_.erase(cache_.begin());  // holders keep their own reference
    return order;
  }

 private:
  const std::int64_t size_;
  const std::uint64_t seed_;
  const bool shuffle_;
  const int shard_count_;
  const int shard_index_;
  const std::int64_t shard_images_;
  std::mutex mu_;
  std::vector<std::pair<std::int64_t, std::shared_ptr<const std::vector<std::int64_t>>>> cache_;
};

// ---------------------------------------------------------------------------------------------
// Shared: everything a worker touches, held by the Loader and by each worker thread. stop() may
// detach a worker stuck in a read; whenever that read returns, even after the Loader is gone, the
// worker finds its claim abandoned (the ring is stopped), finishes it and exits, and the last
// holder frees this (and, when no Batch holds it, the ring).

struct Loader::Shared {
  Shared(std::shared_ptr<const Food101Index> index_in, const LoaderOptions& options_in,
         std::shared_ptr<BatchRing> ring_in, std::size_t sample_bytes_in, FileReader read_in)
      : index(std::move(index_in)),
        options(options_in),
        sample_bytes(sample_bytes_in),
        ring(std::move(ring_in)),
        read(std::move(read_in)),
        records(ring->shape().slots),
        orders(index->size(), options),
        reading(static_cast<std::size_t>(options.workers)),
        exited(static_cast<std::size_t>(options.workers), false) {
    const auto b = static_cast<std::size_t>(options.batch_size);
    for (auto& r : records) {
      r.digests.assign(b, 0);
      r.skipped.resize(b);
      if (options.decode == DecodeDevice::kGpu) r.staged.resize(b);
    }
  }

  // The body of worker thread `worker`: fills claims until the ring stops or fails.
  void work(int worker);
  // Decodes the samples of `claim` with `reader` into the ring, then finishes the claim.
  void fill(SampleReader& reader, const RingClaim& claim);
  // `read`, recording which file `worker` is in for stop()'s warning.
  FileReader watched_read(int worker);

  const std::shared_ptr<const Food101Index> index;
  const LoaderOptions options;
  const std::size_t sample_bytes;
  const std::shared_ptr<BatchRing> ring;
  const FileReader read;
  std::vector<SlotRecords> records;  // per slot; written under a claim, read under a lease
  EpochOrders orders;
  std::atomic<std::int64_t> samples_decoded{0};
  std::atomic<std::int64_t> images_skipped{0};

  // What each worker is doing, for stop(): under mu.
  std::mutex mu;
  std::condition_variable exited_cv;  // a worker set its `exited`
  std::vector<std::string> reading;   // the file a worker is reading, empty when none
  std::vector<bool> exited;           // a worker's body has returned
};

// ---------------------------------------------------------------------------------------------
// Loader

Loader::Loader(std::shared_ptr<const Food101Index> index, LoaderOptions options, FileReader read)
    : index_(std::move(index)), options_(options) {
  if (!index_ || index_->size() == 0) throw std::invalid_argument("Loader: empty dataset index");
  validate(options_);
  // The images this loader reads an epoch: the split, or its shard.
  const std::int64_t n = epoch_images(index_->size(), options_);
  const std::int64_t b = options_.batch_size;
  if (n == 0 || (options_.drop_last && n < b)) {
    std::string shard;
    if (options_.shard_count > 1) {
      shard = options_.pad_shards
                  ? " (" + std::to_string(n) + " in each of " +
                        std::to_string(options_.shard_count) + " shards)"
                  : " (" + std::to_string(n) + " in shard " + std::to_string(options_.shard_index) +
                        " of " + std::to_string(options_.shard_count) + ")";
    }
    throw DataError(index_->dataset_dir().string() + "/meta/" + index_->split() + ".txt: split '" +
                    index_->split() + "' has " + std::to_string(index_->size()) + " images" +
                    shard +
                    (n == 0 ? std::string(", none for this shard")
                            : ", fewer than one batch of " + std::to_string(b) + " (drop_last)"));
  }
  sample_bytes_ = sample_bytes(options_.transform);

  RingShape shape;
  shape.ahead = options_.workers > 0
                    ? static_cast<std::int64_t>(options_.workers) * options_.prefetch_factor
                    : 0;
  shape.slots = static_cast<std::size_t>(shape.ahead) + 2;
  shape.batch_size = b;
  shape.dataset_size = n;
  shape.drop_last = options_.drop_last;
  shape.whole_batches = options_.work_unit == WorkUnit::kBatch;
  shape.slot_image_bytes = sample_bytes_ * static_cast<std::size_t>(b);
  shape.pin_memory = options_.pin_memory;
  try {
    ring_ = std::make_shared<BatchRing>(shape);
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    throw std::runtime_error(
        "batch ring of " + std::to_string(shape.slots) +
        " slots (workers x prefetch_factor + 2) of " + std::to_string(b) + " images of " +
        std::to_string(sample_bytes_) + " bytes: " + e.what() +
        "; use a smaller batch size, fewer workers or a lower prefetch factor");
  }
  shared_ = std::make_shared<Shared>(index_, options_, ring_, sample_bytes_, std::move(read));

  // Parallelism comes from the workers; OpenCV's own thread pool would only oversubscribe the
  // cores (this is process-wide OpenCV state).
  cv::setNumThreads(1);

  if (options_.workers == 0) {
    inline_reader_ = std::make_unique<SampleReader>(index_, options_, shared_->read);
  }
  threads_.reserve(static_cast<std::size_t>(options_.workers));
  for (int w = 0; w < options_.workers; ++w) {
    // The thread holds its own reference: it may outlive the Loader (stop()).
    threads_.emplace_back([shared = shared_, w] {
      shared->work(w);
      {
        std::lock_guard<std::mutex> lock(shared->mu);
        shared->exited[static_cast<std::size_t>(w)] = true;
      }
      shared->exited_cv.notify_all();
    });
  }
}

Loader::~Loader() { stop(); }

void Loader::stop(std::chrono::milliseconds timeout) {
  ring_->stop();
  // Which workers have returned by the deadline, and what the others are reading.
  std::vector<bool> exited;
  std::vector<std::string> reading;
  {
    std::unique_lock<std::mutex> lock(shared_->mu);
    shared_->exited_cv.wait_until(lock, std::chrono::steady_clock::now() + timeout, [&] {
      for (std::size_t w = 0; w < threads_.size(); ++w) {
        if (threads_[w].joinable() && !shared_->exited[w]) return false;
      }
      return true;
    });
    exited = shared_->exited;
    reading = shared_->reading;
  }
  for (std::size_t w = 0; w < threads_.size(); ++w) {
    std::thread& t = threads_[w];
    if (!t.joinable()) continue;  // joined or detached by an earlier stop()
    if (exited[w]) {
      t.join();  // its body has returned: only the thread's own teardown is left
      continue;
    }
    const std::string what = reading[w].empty() ? "not reading a file" : "reading " + reading[w];
    std::fprintf(stderr,
                 "data_pipeline: %s%zu did not stop within %lld ms (%s); detached, it exits when "
                 "that call returns\n",
                 nvtx::kWorkerThreadPrefix, w, static_cast<long long>(timeout.count()),
                 what.c_str());
    t.detach();
  }
}

void Loader::cancel() { ring_->cancel(); }

LoaderStats Loader::stats() const {
  LoaderStats s;
  s.batches_delivered = batches_delivered_.load();
  s.samples_decoded = shared_->samples_decoded.load();
  s.images_skipped = shared_->images_skipped.load();
  s.consumer_wait = std::chrono::nanoseconds(consumer_wait_ns_.load());
  return s;
}

void Loader::reset() { ring_->reset(); }

void Loader::reset_to(std::int64_t epoch) {
  if (epoch < 0)
    throw std::invalid_argument("Loader::reset_to: negative epoch " + std::to_string(epoch));
  ring_->reset(epoch);
}

void Loader::Shared::fill(SampleReader& reader, const RingClaim& claim) {
  ring->open(claim);
  const auto order = orders.get(claim.batch.epoch);
  SlotRecords& slot_records = records[claim.slot];
  std::uint8_t* images = ring->images(claim.slot);
  std::int64_t* labels = ring->labels(claim.slot);
  const std::int64_t base = claim.batch.index_in_epoch * options.batch_size;
  std::int64_t done = 0;
  std::int64_t skipped = 0;
  std::exception_ptr error;
  std::string context;
  {
    nvtx::ScopedRange range(options.work_unit == WorkUnit::kBatch ? nvtx::kLoadBatch
                                                                  : nvtx::kLoadSample);
    for (std::int64_t k = claim.first; k < claim.last; ++k) {
      if (!ring->live(claim)) break;  // abandoned by reset() or stop(): finish() frees the slot
      const auto at = static_cast<std::size_t>(k);
      try {
        const std::int64_t image = (*order)[static_cast<std::size_t>(base + k)];
        std::uint8_t* dst = images + at * sample_bytes;
        SampleResult r = options.decode == DecodeDevice::kGpu
                             ? reader.stage(claim.batch.epoch, image, dst, slot_records.staged[at])
                             : reader.read(claim.batch.epoch, image, dst);
        labels[k] = r.label;
        slot_records.digests[at] = r.digest;
        skipped += r.skipped.has_value();
        slot_records.skipped[at] = std::move(r.skipped);
        ++done;
      } catch (...) {
        error = std::current_exception();
        context = "batch " + std::to_string(claim.batch.index_in_epoch) + " of epoch " +
                  std::to_string(claim.batch.epoch) + ", sample " + std::to_string(k);
        break;
      }
    }
  }
  samples_decoded += done;
  // Counted before finish() makes the batch ready, so a consumer never holds a batch whose
  // replacements the counter has not seen; taken back when the batch was abandoned.
  images_skipped += skipped;
  if (!ring->finish(claim, error, context)) images_skipped -= skipped;
}

FileReader Loader::Shared::watched_read(int worker) {
  // `this` outlives the reader: both belong to the worker's thread, which holds `this`.
  return [this, w = static_cast<std::size_t>(worker)](
             const std::string& path, std::vector<std::uint8_t>& buffer, std::uint64_t max_bytes) {
    struct Reading {
      Shared& shared;
      std::size_t w;
      Reading(Shared& s, std::size_t worker, const std::string& path) : shared(s), w(worker) {
        std::lock_guard<std::mutex> lock(shared.mu);
        shared.reading[w] = path;
      }
      ~Reading() {
        std::lock_guard<std::mutex> lock(shared.mu);
        shared.reading[w].clear();
      }
    } reading(*this, w, path);
    read(path, buffer, max_bytes);
  };
}

void Loader::Shared::work(int worker) {
  const std::string name = nvtx::kWorkerThreadPrefix + std::to_string(worker);
  nvtx::name_current_thread(name);
  // A reader cannot fail to construct for options the constructor accepted; guard anyway so that
  // nothing escapes the thread.
  std::unique_ptr<SampleReader> reader;
  try {
    reader = std::make_unique<SampleReader>(index, options, watched_read(worker));
  } catch (...) {
    ring->fail(std::current_exception());
    return;
  }
  while (const std::optional<RingClaim> claim = ring->claim()) {
    try {
      fill(*reader, *claim);
    } catch (...) {
      // fill() catches per sample; this only guards its bookkeeping (e.g. bad_alloc).
      ring->finish(*claim, std::current_exception(), "worker " + name);
    }
  }
}

Batch Loader::next() {
  const auto started = std::chrono::steady_clock::now();
  if (options_.workers == 0) {
    // Decode here, as PyTorch does with num_workers=0.
    const RingClaim claim = ring_->claim_inline();
    shared_->fill(*inline_reader_, claim);
  }
  const RingLease lease = ring_->acquire();
  ++batches_delivered_;

  Batch batch;
  batch.owner_ = ring_;
  batch.slot_ = lease.slot;
  batch.position_ = lease.batch;
  batch.sample_bytes_ = sample_bytes_;
  const std::int64_t n = lease.batch.count;
  const std::int64_t s = options_.transform.image_size;
  std::int64_t* labels = ring_->labels(lease.slot);
  SlotRecords& records = shared_->records[lease.slot];
  const auto order = shared_->orders.get(lease.batch.epoch);
  const auto first = order->begin() + lease.batch.index_in_epoch * options_.batch_size;
  batch.indices_.assign(first, first + n);
  for (std::int64_t k = 0; k < n; ++k) {
    auto& skipped = records.skipped[static_cast<std::size_t>(k)];
    if (skipped) batch.skipped_.push_back(std::move(*skipped));
    skipped.reset();
  }
  if (options_.decode == DecodeDevice::kGpu) {
    // Hand the records over; the slot gets fresh ones for its next fill.
    batch.staged_.swap(records.staged);
    batch.staged_.resize(static_cast<std::size_t>(n));
    records.staged.resize(static_cast<std::size_t>(options_.batch_size));
  }
  batch.digest_ = common::hash64(labels, static_cast<std::size_t>(n) * sizeof(std::int64_t),
                                 static_cast<std::uint64_t>(n));
  batch.digest_ = common::hash64(
      records.digests.data(), static_cast<std::size_t>(n) * sizeof(std::uint64_t), batch.digest_);
  const auto dtype =
      options_.transform.dtype == HostDType::kUInt8 ? torch::kUInt8 : torch::kFloat32;
  const bool nchw = options_.transform.layout == ImageLayout::kNchw;
  batch.images_ = torch::from_blob(ring_->images(lease.slot), {n, 3, s, s},
                                   nchw ? std::vector<std::int64_t>{s * s * 3, s * s, s, 1}
                                        : std::vector<std::int64_t>{s * s * 3, 1, s * 3, 3},
                                   torch::TensorOptions().dtype(dtype));
  batch.labels_ = torch::from_blob(labels, {n}, torch::TensorOptions().dtype(torch::kInt64));
  batch.wait_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now() - started);
  consumer_wait_ns_ += batch.wait_.count();
  return batch;
}

}  // namespace data_pipeline
