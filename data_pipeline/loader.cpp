// Multithreaded Food-101 loader: worker threads fill the ring's claims; the consumer takes batches.
#include "data_pipeline/loader.h"

#include <algorithm>
#include <numeric>
#include <opencv2/core.hpp>
#include <stdexcept>
#include <string>
#include <utility>

#include "data_pipeline/counter_rng.h"
#include "data_pipeline/data_error.h"
#include "data_pipeline/hash64.h"
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
  EpochOrders(std::int64_t size, std::uint64_t seed, bool shuffle, int shard_count, int shard_index)
      : size_(size),
        seed_(seed),
        shuffle_(shuffle),
        shard_count_(shard_count),
        shard_index_(shard_index) {}

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
      const std::int64_t shard = shard_size(size_, shard_count_);
      order->reserve(static_cast<std::size_t>(shard));
      for (std::int64_t j = 0; j < shard; ++j) {
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
  std::mutex mu_;
  std::vector<std::pair<std::int64_t, std::shared_ptr<const std::vector<std::int64_t>>>> cache_;
};

// ---------------------------------------------------------------------------------------------
// Loader

Loader::Loader(std::shared_ptr<const Food101Index> index, LoaderOptions options)
    : index_(std::move(index)), options_(std::move(options)) {
  if (!index_ || index_->size() == 0) throw std::invalid_argument("Loader: empty dataset index");
  validate(options_);
  // The images this loader reads an epoch: the split, or its shard.
  const std::int64_t n = shard_size(index_->size(), options_.shard_count);
  const std::int64_t b = options_.batch_size;
  if (options_.drop_last && n < b) {
    const std::string shard = options_.shard_count > 1
                                  ? " (" + std::to_string(n) + " in each of " +
                                        std::to_string(options_.shard_count) + " shards)"
                                  : "";
    throw DataError(index_->dataset_dir().string() + "/meta/" + index_->split() + ".txt: split '" +
                    index_->split() + "' has " + std::to_string(index_->size()) + " images" +
                    shard + ", fewer than one batch of " + std::to_string(b) + " (drop_last)");
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
  records_.resize(shape.slots);
  for (auto& r : records_) {
    r.digests.assign(static_cast<std::size_t>(b), 0);
    r.skipped.resize(static_cast<std::size_t>(b));
    if (options_.decode == DecodeDevice::kGpu) r.staged.resize(static_cast<std::size_t>(b));
  }
  orders_ = std::make_unique<EpochOrders>(index_->size(), options_.seed, options_.shuffle,
                                          options_.shard_count, options_.shard_index);

  // Parallelism comes from the workers; OpenCV's own thread pool would only oversubscribe the
  // cores (this is process-wide OpenCV state).
  cv::setNumThreads(1);

  if (options_.workers == 0) inline_reader_ = std::make_unique<SampleReader>(index_, options_);
  threads_.reserve(static_cast<std::size_t>(options_.workers));
  for (int w = 0; w < options_.workers; ++w) threads_.emplace_back([this, w] { worker_main(w); });
}

Loader::~Loader() { stop(); }

void Loader::stop() {
  ring_->stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void Loader::cancel() { ring_->cancel(); }

LoaderStats Loader::stats() const {
  LoaderStats s;
  s.batches_delivered = batches_delivered_.load();
  s.samples_decoded = samples_decoded_.load();
  s.images_skipped = images_skipped_.load();
  s.consumer_wait = std::chrono::nanoseconds(consumer_wait_ns_.load());
  return s;
}

void Loader::reset() { ring_->reset(); }

void Loader::reset_to(std::int64_t epoch) {
  if (epoch < 0)
    throw std::invalid_argument("Loader::reset_to: negative epoch " + std::to_string(epoch));
  ring_->reset(epoch);
}

void Loader::fill(SampleReader& reader, const RingClaim& claim) {
  ring_->open(claim);
  const auto order = orders_->get(claim.batch.epoch);
  SlotRecords& records = records_[claim.slot];
  std::uint8_t* images = ring_->images(claim.slot);
  std::int64_t* labels = ring_->labels(claim.slot);
  const std::int64_t base = claim.batch.index_in_epoch * options_.batch_size;
  std::int64_t done = 0;
  std::int64_t skipped = 0;
  std::exception_ptr error;
  std::string context;
  {
    nvtx::ScopedRange range(options_.work_unit == WorkUnit::kBatch ? nvtx::kLoadBatch
                                                                   : nvtx::kLoadSample);
    for (std::int64_t k = claim.first; k < claim.last; ++k) {
      if (!ring_->live(claim)) break;  // abandoned by reset() or stop(): finish() frees the slot
      const auto at = static_cast<std::size_t>(k);
      try {
        const std::int64_t image = (*order)[static_cast<std::size_t>(base + k)];
        std::uint8_t* dst = images + at * sample_bytes_;
        SampleResult r = options_.decode == DecodeDevice::kGpu
                             ? reader.stage(claim.batch.epoch, image, dst, records.staged[at])
                             : reader.read(claim.batch.epoch, image, dst);
        labels[k] = r.label;
        records.digests[at] = r.digest;
        skipped += r.skipped.has_value();
        records.skipped[at] = std::move(r.skipped);
        ++done;
      } catch (...) {
        error = std::current_exception();
        context = "batch " + std::to_string(claim.batch.index_in_epoch) + " of epoch " +
                  std::to_string(claim.batch.epoch) + ", sample " + std::to_string(k);
        break;
      }
    }
  }
  samples_decoded_ += done;
  // Counted before finish() makes the batch ready, so a consumer never holds a batch whose
  // replacements the counter has not seen; taken back when the batch was abandoned.
  images_skipped_ += skipped;
  if (!ring_->finish(claim, error, context)) images_skipped_ -= skipped;
}

void Loader::worker_main(int worker) {
  const std::string name = nvtx::kWorkerThreadPrefix + std::to_string(worker);
  nvtx::name_current_thread(name);
  // A reader cannot fail to construct for options the constructor accepted; guard anyway so that
  // nothing escapes the thread.
  std::unique_ptr<SampleReader> reader;
  try {
    reader = std::make_unique<SampleReader>(index_, options_);
  } catch (...) {
    ring_->fail(std::current_exception());
    return;
  }
  while (const std::optional<RingClaim> claim = ring_->claim()) {
    try {
      fill(*reader, *claim);
    } catch (...) {
      // fill() catches per sample; this only guards its bookkeeping (e.g. bad_alloc).
      ring_->finish(*claim, std::current_exception(), "worker " + name);
    }
  }
}

Batch Loader::next() {
  const auto started = std::chrono::steady_clock::now();
  if (options_.workers == 0) {
    // Decode here, as PyTorch does with num_workers=0.
    const RingClaim claim = ring_->claim_inline();
    fill(*inline_reader_, claim);
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
  SlotRecords& records = records_[lease.slot];
  const auto order = orders_->get(lease.batch.epoch);
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
  batch.digest_ = hash64(labels, static_cast<std::size_t>(n) * sizeof(std::int64_t),
                         static_cast<std::uint64_t>(n));
  batch.digest_ = hash64(records.digests.data(),
                         static_cast<std::size_t>(n) * sizeof(std::uint64_t), batch.digest_);
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
