// The GPU decode stage: its construction, the stage's thread (reset, take, decode, publish), and
// the consumer's side (next, reset, cancel, stop).
#include "data_pipeline/gpu/gpu_decoder.h"

#include <cstdio>
#include <stdexcept>
#include <utility>

#include "common/cuda_check.h"
#include "data_pipeline/data_error.h"
#include "data_pipeline/gpu/batch_decoder.h"
#include "data_pipeline/gpu/decode_resources.h"
#include "data_pipeline/nvtx_domain.h"
#include "data_pipeline/sample_reader.h"

namespace data_pipeline::gpu {

GpuDecoder::GpuDecoder(std::shared_ptr<const Food101Index> index, LoaderOptions options,
                       GpuDecodeOptions gpu)
    : options_(std::move(options)), gpu_(gpu) {
  validate(options_);
  if (gpu_.decode_sets < 1)
    throw std::invalid_argument("GpuDecodeOptions.decode_sets: expected >= 1");
  if (gpu_.output_batches < 2) {
    throw std::invalid_argument("GpuDecodeOptions.output_batches: expected >= 2");
  }
  WORKLOAD_CUDA_CHECK(cudaSetDevice(gpu_.device));
  auto resources = std::make_unique<DecodeResources>();
  info_ = open_hardware_decoder(gpu_.use_engines, resources->handle);
  resources->create_sets(info_.hardware, gpu_.decode_sets, options_.batch_size);
  pool_ = std::make_shared<OutputPool>(
      gpu_.output_batches, options_.batch_size, options_.transform.image_size,
      options_.transform.dtype == HostDType::kFloat32,
      options_.transform.layout == ImageLayout::kNchw, gpu_.device);
  LoaderOptions lo = options_;
  lo.decode = info_.hardware ? DecodeDevice::kGpu : DecodeDevice::kCpu;
  lo.pin_memory = true;  // the stage copies from the ring
  decoder_ = std::make_unique<BatchDecoder>(
      std::move(resources), std::make_unique<SampleReader>(index, lo), pool_, options_,
      info_.hardware, gpu_.before_resize, counters_);
  loader_ = std::make_unique<Loader>(std::move(index), lo);
  thread_ = std::thread([this] { stage_main(); });
}

GpuDecoder::~GpuDecoder() { stop(); }

void GpuDecoder::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_cv_.notify_all();
  if (loader_) loader_->cancel();  // wakes a stage blocked in Loader::next()
  if (pool_) pool_->stop();        // or in OutputPool::acquire()
  if (thread_.joinable()) thread_.join();
  std::deque<Item> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dropped.swap(queue_);
  }
  dropped.clear();
  if (loader_) loader_->stop();
  if (decoder_) {
    try {
      decoder_->synchronize();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warning: GPU decode stage: %s\n", e.what());
    }
  }
}

void GpuDecoder::cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  ready_cv_.notify_all();
  loader_->cancel();
}

void GpuDecoder::reset(std::optional<std::int64_t> epoch) {
  if (epoch && *epoch < 0) throw std::invalid_argument("GpuDecoder::reset: negative epoch");
  std::deque<Item> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    epochs_.start_next(epoch);  // the stage passes it on to the loader (follow_reset)
    ++generation_;
    dropped.swap(queue_);
  }
  ready_cv_.notify_all();
  dropped.clear();  // returns their buffers
}

GpuDecodeStats GpuDecoder::stats() const { return counters_.snapshot(); }

DeviceBatch GpuDecoder::next() {
  const auto started = std::chrono::steady_clock::now();
  Item item;
  {
    std::unique_lock<std::mutex> lock(mu_);
    ready_cv_.wait(lock, [&] { return cancelled_ || stopping_ || failure_ || !queue_.empty(); });
    if (cancelled_) throw Cancelled();
    if (!queue_.empty()) {
      item = std::move(queue_.front());
      queue_.pop_front();
    } else if (failure_) {
      std::rethrow_exception(failure_);
    } else {
      throw std::logic_error("GpuDecoder::next after stop()");
    }
    if (item.error) {
      failure_ = item.error;
      std::rethrow_exception(item.error);
    }
    epochs_.taken(item.batch.epoch());
  }
  item.batch.wait_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now() - started);
  counters_.add_consumer_wait(item.batch.wait_);
  return std::move(item.batch);
}

void GpuDecoder::stage_main() {
  nvtx::name_current_thread(nvtx::kGpuStageThread);
  std::uint64_t handled_generation = 0;
  try {
    WORKLOAD_CUDA_CHECK(cudaSetDevice(gpu_.device));
    for (;;) {
      const std::optional<std::uint64_t> generation = follow_reset(handled_generation);
      if (!generation) return;  // stopping
      Batch host = loader_->next();
      const std::optional<std::size_t> slot = pool_->acquire();
      if (!slot) return;  // stopping
      publish(decoder_->decode(std::move(host), *slot), *generation);
    }
  } catch (const Cancelled&) {
    // stop() or cancel(): nothing to report.
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Item{DeviceBatch{}, std::current_exception()});
    ready_cv_.notify_all();
  }
}

std::optional<std::uint64_t> GpuDecoder::follow_reset(std::uint64_t& handled) {
  std::uint64_t generation = 0;
  std::optional<std::int64_t> reset_to;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return std::nullopt;
    generation = generation_;
    if (generation != handled) reset_to = epochs_.first();
  }
  if (reset_to) {
    loader_->reset_to(*reset_to);
    handled = generation;
  }
  return generation;
}

void GpuDecoder::publish(DeviceBatch batch, std::uint64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  if (generation == generation_ && !stopping_) {
    queue_.push_back(Item{std::move(batch), nullptr});
    ready_cv_.notify_all();
  }
  // else: decoded for a traversal reset() abandoned; the batch returns its buffer as it goes.
}

}  // namespace data_pipeline::gpu
