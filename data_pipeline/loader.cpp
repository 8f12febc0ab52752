// Multithreaded Food-101 loader: claims, fills and delivers ring slots in order.
#include "data_pipeline/loader.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <opencv2/core.hpp>
#include <stdexcept>
#include <utility>

#include "data_pipeline/counter_rng.h"
#include "data_pipeline/data_error.h"
#include "data_pipeline/detail/hash64.h"
#include "data_pipeline/detail/thread_name.h"

namespace data_pipeline {

const char* to_string(WorkUnit unit) { return unit == WorkUnit::kSample ? "sample" : "batch"; }
const char* to_string(BadImagePolicy policy) {
  return policy == BadImagePolicy::kSkip ? "skip" : "error";
}

namespace {
constexpr std::size_t kAlign = 256;
constexpr int kMaxReplacementAttempts = 32;
std::size_t align_up(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }
}  // namespace

// One ring slot. Fields other than the pointers are guarded by Loader::mu_, except the sample
// bytes, labels and digests, which each writer owns for the samples it claimed.
struct Loader::Slot {
  std::uint8_t* images = nullptr;
  std::int64_t* labels = nullptr;
  SlotState state = SlotState::kFree;
  std::int64_t sequence = -1;
  std::uint64_t generation = 0;
  std::int64_t epoch = 0;
  std::int64_t index_in_epoch = 0;
  std::int64_t count = 0;
  std::shared_ptr<const std::vector<std::int64_t>> perm;
  std::int64_t pending = 0;  // samples not yet finished
  int writers = 0;           // workers holding a claim on this slot
  bool open = false;         // the reuse fence has been waited for this fill
  ReuseFence fence;          // from the last release; waited before the next fill
  std::exception_ptr error;
  std::string error_context;
  std::vector<std::uint64_t> digests;
  std::vector<SkippedImage> skipped;
};

// A claim: samples [first, last) of the batch in `slot`.
struct Loader::Item {
  std::size_t slot = 0;
  std::int64_t sequence = 0;
  std::uint64_t generation = 0;
  std::int64_t first = 0;
  std::int64_t last = 0;
  bool opener = false;  // this claim began the fill and waits the reuse fence
};

// ---------------------------------------------------------------------------------------------
// Batch

Batch::~Batch() { release(); }

Batch::Batch(Batch&& other) noexcept { *this = std::move(other); }

Batch& Batch::operator=(Batch&& other) noexcept {
  if (this != &other) {
    release();
    loader_ = std::exchange(other.loader_, nullptr);
    slot_ = other.slot_;
    images_ = std::move(other.images_);
    labels_ = std::move(other.labels_);
    size_ = other.size_;
    epoch_ = other.epoch_;
    index_in_epoch_ = other.index_in_epoch_;
    sequence_ = other.sequence_;
    digest_ = other.digest_;
    wait_ = other.wait_;
    skipped_ = std::move(other.skipped_);
  }
  return *this;
}

void Batch::release() { release_after(nullptr); }

void Batch::release_after(ReuseFence fence) {
  if (!loader_) return;
  images_ = torch::Tensor();
  labels_ = torch::Tensor();
  loader_->release_slot(slot_, std::move(fence));
  loader_ = nullptr;
}

// ---------------------------------------------------------------------------------------------
// Loader

Loader::Loader(std::shared_ptr<const Food101Index> index, LoaderOptions options)
    : index_(std::move(index)), options_(std::move(options)) {
  if (!index_ || index_->size() == 0) throw std::invalid_argument("Loader: empty dataset index");
  if (options_.batch_size < 1) {
    throw std::invalid_argument("batch_size: expected >= 1, got " +
                                std::to_string(options_.batch_size));
  }
  if (options_.workers < 0) {
    throw std::invalid_argument("workers: expected >= 0, got " + std::to_string(options_.workers));
  }
  if (options_.prefetch_factor < 1) {
    throw std::invalid_argument("prefetch_factor: expected >= 1, got " +
                                std::to_string(options_.prefetch_factor));
  }
  if (options_.transform.image_size < 1) {
    throw std::invalid_argument("image_size: expected >= 1, got " +
                                std::to_string(options_.transform.image_size));
  }
  const std::int64_t n = index_->size();
  const std::int64_t b = options_.batch_size;
  batches_per_epoch_ = options_.drop_last ? n / b : (n + b - 1) / b;
  if (batches_per_epoch_ == 0) {
    throw DataError(index_->dataset_dir().string() + "/meta/" + index_->split() + ".txt: split '" +
                    index_->split() + "' has " + std::to_string(n) +
                    " images, fewer than one batch of " + std::to_string(b) + " (drop_last)");
  }
  ahead_ = options_.workers > 0
               ? static_cast<std::int64_t>(options_.workers) * options_.prefetch_factor
               : 0;
  const std::size_t nslots = static_cast<std::size_t>(ahead_) + 2;

  SampleTransform probe(options_.transform);
  sample_bytes_ = probe.sample_bytes();
  const std::size_t image_bytes = align_up(sample_bytes_ * static_cast<std::size_t>(b));
  const std::size_t label_bytes = align_up(sizeof(std::int64_t) * static_cast<std::size_t>(b));
  try {
    block_ = HostBlock(nslots * (image_bytes + label_bytes), options_.pin_memory);
  } catch (const std::exception& e) {
    throw std::runtime_error(
        "batch ring of " + std::to_string(nslots) + " slots (workers x prefetch_factor + 2) of " +
        std::to_string(b) + " images of " + std::to_string(sample_bytes_) + " bytes: " + e.what() +
        "; use a smaller batch size, fewer workers or a lower prefetch factor");
  }
  auto* base = static_cast<std::uint8_t*>(block_.data());
  for (std::size_t i = 0; i < nslots; ++i) {
    auto slot = std::make_unique<Slot>();
    slot->images = base + i * image_bytes;
    slot->labels = reinterpret_cast<std::int64_t*>(base + nslots * image_bytes + i * label_bytes);
    slot->digests.assign(static_cast<std::size_t>(b), 0);
    slots_.push_back(std::move(slot));
  }

  // Parallelism comes from the workers; OpenCV's own thread pool would only oversubscribe the
  // cores (this is process-wide OpenCV state).
  cv::setNumThreads(1);

  if (options_.workers == 0) {
    inline_transform_ = std::make_unique<SampleTransform>(options_.transform);
  }
  threads_.reserve(static_cast<std::size_t>(options_.workers));
  for (int w = 0; w < options_.workers; ++w) threads_.emplace_back([this, w] { worker_main(w); });
}

Loader::~Loader() { stop(); }

void Loader::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    live_stopping_.store(true, std::memory_order_relaxed);
  }
  work_cv_.notify_all();
  ready_cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void Loader::cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    stopping_ = true;
    live_stopping_.store(true, std::memory_order_relaxed);
  }
  work_cv_.notify_all();
  ready_cv_.notify_all();
}

LoaderStats Loader::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::shared_ptr<const std::vector<std::int64_t>> Loader::permutation(std::int64_t epoch) {
  for (const auto& [e, p] : perms_) {
    if (e == epoch) return p;
  }
  auto perm = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(index_->size()));
  std::iota(perm->begin(), perm->end(), std::int64_t{0});
  if (options_.shuffle) {
    CounterRng rng(options_.seed, static_cast<std::uint64_t>(epoch), 0, CounterRng::kPermutation);
    for (std::size_t i = perm->size() - 1; i > 0; --i) {
      std::swap((*perm)[i], (*perm)[rng.below(i + 1)]);
    }
  }
  perms_.emplace_back(epoch, perm);
  if (perms_.size() > 4) perms_.erase(perms_.begin());  // slots keep their own reference
  return perm;
}

void Loader::begin_fill(Slot& slot, std::int64_t sequence) {
  const std::int64_t position = sequence - traversal_base_;
  slot.state = SlotState::kFilling;
  slot.sequence = sequence;
  slot.generation = generation_;
  slot.epoch = traversal_epoch_ + position / batches_per_epoch_;
  slot.index_in_epoch = position % batches_per_epoch_;
  slot.count =
      std::min(options_.batch_size, index_->size() - slot.index_in_epoch * options_.batch_size);
  slot.perm = permutation(slot.epoch);
  slot.pending = slot.count;
  slot.writers = 0;
  slot.open = false;
  slot.error = nullptr;
  slot.error_context.clear();
  slot.skipped.clear();
}

bool Loader::try_claim(Item& item) {
  if (stopping_ || failure_) return false;
  const std::int64_t seq = claim_seq_;
  if (seq >= consume_seq_ + ahead_) return false;  // PyTorch's bound on batches in flight
  const std::size_t idx = static_cast<std::size_t>(seq) % slots_.size();
  Slot& slot = *slots_[idx];
  item.opener = false;
  if (claim_sample_ == 0) {
    if (slot.state != SlotState::kFree) return false;  // leased, or stale writers still in it
    begin_fill(slot, seq);
    item.opener = true;
  }
  item.slot = idx;
  item.sequence = seq;
  item.generation = generation_;
  item.first = claim_sample_;
  item.last = options_.work_unit == WorkUnit::kBatch ? slot.count : claim_sample_ + 1;
  if (item.last >= slot.count) {
    ++claim_seq_;
    claim_sample_ = 0;
  } else {
    claim_sample_ = item.last;
  }
  ++slot.writers;
  return true;
}

void Loader::open_slot(Slot& slot, const Item& item, std::unique_lock<std::mutex>& lock) {
  if (!item.opener) {
    work_cv_.wait(lock, [&] { return slot.open || stopping_ || slot.generation != generation_; });
    return;
  }
  ReuseFence fence = std::move(slot.fence);
  slot.fence = nullptr;
  if (fence) {
    lock.unlock();
    std::exception_ptr error;
    {
      detail::WorkerRange range("reuse_fence");
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

void Loader::fill(SampleTransform& transform, const Item& item) {
  Slot& slot = *slots_[item.slot];
  // Read under the claim: begin_fill set these before the claim was handed out.
  const auto& perm = *slot.perm;
  const std::int64_t epoch = slot.epoch;
  const std::int64_t base = slot.index_in_epoch * options_.batch_size;
  std::int64_t done = 0;
  std::exception_ptr error;
  std::string context;
  std::vector<SkippedImage> skipped;
  detail::WorkerRange range(options_.work_unit == WorkUnit::kBatch ? "load_batch" : "load_sample");
  for (std::int64_t k = item.first; k < item.last; ++k) {
    if (live_generation_.load(std::memory_order_relaxed) != item.generation ||
        live_stopping_.load(std::memory_order_relaxed)) {
      break;  // discarded by reset() or stop(): finish_item frees the slot
    }
    const std::int64_t dataset_index = perm[static_cast<std::size_t>(base + k)];
    std::uint8_t* dst = slot.images + static_cast<std::size_t>(k) * sample_bytes_;
    try {
      std::int64_t used = dataset_index;
      std::uint64_t digest = 0;
      try {
        CounterRng rng(options_.seed, static_cast<std::uint64_t>(epoch),
                       static_cast<std::uint64_t>(dataset_index), CounterRng::kAugment);
        digest = transform.apply_file((*index_)[dataset_index].path.string(), rng, dst);
      } catch (const DataError& e) {
        if (options_.on_bad_image != BadImagePolicy::kSkip) throw;
        // Deterministic replacement: candidates drawn from (seed, epoch, index), tried in order,
        // so the same image replaces it whatever the worker count or schedule.
        CounterRng pick(options_.seed, static_cast<std::uint64_t>(epoch),
                        static_cast<std::uint64_t>(dataset_index), CounterRng::kReplacement);
        bool replaced = false;
        std::string last_error = e.what();
        for (int attempt = 0; attempt < kMaxReplacementAttempts && !replaced; ++attempt) {
          const auto candidate =
              static_cast<std::int64_t>(pick.below(static_cast<std::uint64_t>(index_->size())));
          if (candidate == dataset_index) continue;
          try {
            CounterRng rng(options_.seed, static_cast<std::uint64_t>(epoch),
                           static_cast<std::uint64_t>(candidate), CounterRng::kAugment);
            digest = transform.apply_file((*index_)[candidate].path.string(), rng, dst);
            used = candidate;
            replaced = true;
          } catch (const DataError& again) {
            last_error = again.what();
          }
        }
        if (!replaced) {
          throw DataError(std::string(e.what()) + " (and no replacement image decoded after " +
                          std::to_string(kMaxReplacementAttempts) +
                          " attempts; last: " + last_error + ")");
        }
        skipped.push_back({(*index_)[dataset_index].path.string(), e.what(), epoch, dataset_index,
                           (*index_)[used].path.string()});
      }
      slot.labels[k] = (*index_)[used].label;
      slot.digests[static_cast<std::size_t>(k)] = digest;
      ++done;
    } catch (...) {
      error = std::current_exception();
      context = "batch " + std::to_string(slot.index_in_epoch) + " of epoch " +
                std::to_string(epoch) + ", sample " + std::to_string(k);
      break;
    }
  }
  finish_item(item, done, error, context, std::move(skipped));
}

void Loader::finish_item(const Item& item, std::int64_t done, std::exception_ptr error,
                         const std::string& context, std::vector<SkippedImage> skipped) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = *slots_[item.slot];
  --slot.writers;
  stats_.samples_decoded += done;
  if (slot.generation != generation_ || stopping_) {
    // Stale (reset) or shutting down: the last writer out returns the slot.
    if (slot.writers == 0 && slot.state == SlotState::kFilling) {
      slot.state = SlotState::kFree;
      work_cv_.notify_all();
    }
    return;
  }
  stats_.images_skipped += static_cast<std::int64_t>(skipped.size());
  for (auto& s : skipped) slot.skipped.push_back(std::move(s));
  if (error && !slot.error) {
    slot.error = error;
    slot.error_context = context;
  }
  slot.pending -= item.last - item.first;
  if (slot.pending == 0) {
    slot.state = SlotState::kReady;
    ready_cv_.notify_all();
  }
}

void Loader::worker_main(int worker) {
  const std::string name = options_.thread_name_prefix + std::to_string(worker);
  detail::name_current_thread(name);
  // Constructing the transform cannot fail for options the constructor accepted; guard anyway so
  // nothing escapes the thread.
  std::unique_ptr<SampleTransform> transform;
  try {
    transform = std::make_unique<SampleTransform>(options_.transform);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_) failure_ = std::current_exception();
    ready_cv_.notify_all();
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    Item item;
    bool claimed = false;
    work_cv_.wait(lock, [&] {
      if (stopping_ || failure_) return true;
      claimed = try_claim(item);
      return claimed;
    });
    if (!claimed) return;
    open_slot(*slots_[item.slot], item, lock);
    lock.unlock();
    try {
      fill(*transform, item);
    } catch (...) {
      // fill() catches per sample; this only guards bookkeeping (e.g. bad_alloc).
      finish_item(item, 0, std::current_exception(), "worker " + name, {});
    }
    lock.lock();
  }
}

Batch Loader::next() {
  const auto started = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  if (cancelled_) throw Cancelled();
  if (failure_) std::rethrow_exception(failure_);
  if (stopping_) throw std::logic_error("Loader::next called after stop()");
  const std::int64_t seq = consume_seq_;
  const std::size_t idx = static_cast<std::size_t>(seq) % slots_.size();
  Slot& slot = *slots_[idx];

  if (options_.workers == 0) {
    // Decode here, as PyTorch does with num_workers=0.
    if (slot.state != SlotState::kFree) {
      throw std::logic_error(
          "Loader::next: with workers=0 the consumer may hold at most one earlier batch");
    }
    begin_fill(slot, seq);
    claim_seq_ = seq + 1;
    Item item;
    item.slot = idx;
    item.sequence = seq;
    item.generation = generation_;
    item.first = 0;
    item.last = slot.count;
    item.opener = true;
    slot.writers = 1;
    open_slot(slot, item, lock);
    lock.unlock();
    fill(*inline_transform_, item);
    lock.lock();
  }

  ready_cv_.wait(lock, [&] {
    return stopping_ || failure_ ||
           (slot.state == SlotState::kReady && slot.sequence == seq &&
            slot.generation == generation_);
  });
  if (cancelled_) throw Cancelled();
  if (failure_) std::rethrow_exception(failure_);
  if (stopping_) throw std::logic_error("Loader::next: the loader was stopped");

  if (slot.error) {
    // Attach where it happened, keep the type that tells data errors from the rest, and leave
    // the loader failed so every later next() says the same.
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
    work_cv_.notify_all();
    std::rethrow_exception(failure_);
  }

  slot.state = SlotState::kLeased;
  ++consume_seq_;
  last_consumed_epoch_ = slot.epoch;
  ++stats_.batches_delivered;
  Batch batch;
  batch.loader_ = this;
  batch.slot_ = idx;
  batch.size_ = slot.count;
  batch.epoch_ = slot.epoch;
  batch.index_in_epoch_ = slot.index_in_epoch;
  batch.sequence_ = seq;
  batch.skipped_ = std::move(slot.skipped);
  slot.skipped.clear();
  lock.unlock();
  work_cv_.notify_all();  // the prefetch bound moved

  const std::int64_t n = slot.count;
  const std::int64_t s = options_.transform.image_size;
  batch.digest_ = detail::hash64(slot.labels, static_cast<std::size_t>(n) * sizeof(std::int64_t),
                                 static_cast<std::uint64_t>(n));
  batch.digest_ = detail::hash64(
      slot.digests.data(), static_cast<std::size_t>(n) * sizeof(std::uint64_t), batch.digest_);
  const auto dtype =
      options_.transform.dtype == HostDType::kUInt8 ? torch::kUInt8 : torch::kFloat32;
  batch.images_ = torch::from_blob(slot.images, {n, 3, s, s}, {s * s * 3, 1, s * 3, 3},
                                   torch::TensorOptions().dtype(dtype));
  batch.labels_ = torch::from_blob(slot.labels, {n}, torch::TensorOptions().dtype(torch::kInt64));
  batch.wait_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now() - started);
  {
    std::lock_guard<std::mutex> guard(mu_);
    stats_.consumer_wait += batch.wait_;
  }
  return batch;
}

void Loader::reset() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    traversal_epoch_ = (last_consumed_epoch_ >= 0 ? last_consumed_epoch_ : traversal_epoch_) + 1;
    last_consumed_epoch_ = -1;
    ++generation_;
    live_generation_.store(generation_, std::memory_order_relaxed);
    // Keep the sequence (and so the slot mapping) continuous: batches claimed for the old
    // traversal are abandoned and their slots return as their writers notice.
    traversal_base_ = consume_seq_;
    claim_seq_ = consume_seq_;
    claim_sample_ = 0;
    for (auto& slot : slots_) {
      if (slot->generation == generation_) continue;
      if ((slot->state == SlotState::kFilling || slot->state == SlotState::kReady) &&
          slot->writers == 0) {
        slot->state = SlotState::kFree;
      }
    }
  }
  work_cv_.notify_all();
}

void Loader::release_slot(std::size_t idx, ReuseFence fence) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& slot = *slots_[idx];
    slot.state = SlotState::kFree;
    slot.fence = std::move(fence);
  }
  work_cv_.notify_all();
}

}  // namespace data_pipeline
