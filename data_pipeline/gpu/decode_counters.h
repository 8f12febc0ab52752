// The GPU decode stage's counters: one GpuDecodeStats under one lock, updated by named events.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "data_pipeline/gpu_decode_stats.h"

namespace data_pipeline::gpu {

/// What GpuDecoder::stats() returns, kept as it happens.
///
/// Thread-safety: the stage's thread counts images and batches, the consumer's thread its waits,
/// and any thread takes snapshots; every member function takes the one lock for the whole update
/// or copy, so a snapshot never shows half of an update. The lock is held only for the few
/// additions of one update, never across a call out.
class DecodeCounters {
 public:
  /// `images` went to the CPU path (the loader threads' or the stage's) because of `reason`.
  void add_fallback(const std::string& reason, std::int64_t images) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.fallback_images += images;
    stats_.fallback_reasons[reason] += images;
  }
  /// One image staged for the engines was refused by nvJPEG (counted as a fallback separately).
  void add_refused() {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.refused_images;
  }
  /// nvJPEG failed a hardware batch (its images are counted as fallbacks separately).
  void add_failed_batch() {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.failed_batches;
  }
  /// A batch was decoded, `hardware_images` of it on the engines.
  void add_batch(std::int64_t hardware_images) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.batches;
    stats_.hardware_images += hardware_images;
  }
  /// The consumer blocked `wait` in next().
  void add_consumer_wait(std::chrono::nanoseconds wait) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.consumer_wait += wait;
  }

  /// A copy of the counters as of now.
  GpuDecodeStats snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  mutable std::mutex mu_;
  GpuDecodeStats stats_;  // under mu_
};

}  // namespace data_pipeline::gpu
