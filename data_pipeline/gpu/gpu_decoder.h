// The GPU decode stage (--decode gpu): nvJPEG's batched hardware decoder on the GPU's JPEG engines,
// each image cut to its RandomResizedCrop window by the decoder's region of interest, then one
// resize kernel that also flips, normalises and writes the channels-last batch on the device.
#pragma once

#include <cuda_runtime_api.h>
#include <torch/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data_pipeline/batch_ring.h"
#include "data_pipeline/food101_index.h"
#include "data_pipeline/gpu_decode_stats.h"
#include "data_pipeline/loader.h"
#include "data_pipeline/loader_options.h"

namespace data_pipeline::gpu {

/// Settings of the stage beyond the loader's.
struct GpuDecodeOptions {
  int device = 0;       ///< CUDA device the batches are decoded on and delivered to.
  int decode_sets = 2;  ///< Hardware batches in flight (one nvJPEG state and buffer set each).
  /// Device batches: the consumer's, the ready ones, the one being written. A buffer is rewritten
  /// only once the device has run the step that read it, so the stage's lead over the device is
  /// output_batches - 2 batches: six leave it a step of slack for the engines' latency.
  int output_batches = 6;
  /// False: behave as on a GPU without JPEG engines (the loader threads decode every image and the
  /// stage only copies them), for tests of that path on a GPU that has engines.
  bool use_engines = true;
  /// Diagnostics and tests: called on the stage's thread with its stream just before each resize
  /// launch (e.g. to queue slow work ahead of the kernel and check that buffer reuse waits for it).
  std::function<void(cudaStream_t)> before_resize;
};

class OutputPool;

/// A decoded batch on the device: a lease on one of the stage's output buffers.
///
/// `images()` (N x 3 x S x S, channels_last or NCHW per the options' layout, float32 or uint8 per
/// their dtype) and `labels()` are device tensors written on the stage's stream; make the reading
/// stream wait `ready()` first. The BatchInfo is the loader's batch's: its digest covers what the
/// stage was given (per sample the file's bytes, crop and flip, or the CPU path's pixels), so it is
/// identical across loader settings; `staged()` has each sample's crop window and flip.
/// Release with `release_after(fence)` once the reading work is queued, where `fence` blocks until
/// it has run (e.g. a CUDA event synchronize): the stage calls it before writing the buffer
/// again. The destructor releases without a fence. Move-only; one thread at a time.
class DeviceBatch : public BatchInfo {
 public:
  DeviceBatch() = default;
  ~DeviceBatch();
  DeviceBatch(DeviceBatch&& other) noexcept;
  DeviceBatch& operator=(DeviceBatch&& other) noexcept;
  DeviceBatch(const DeviceBatch&) = delete;
  DeviceBatch& operator=(const DeviceBatch&) = delete;

  bool valid() const { return pool_ != nullptr; }
  const torch::Tensor& images() const { return images_; }
  const torch::Tensor& labels() const { return labels_; }
  /// Recorded on the stage's stream after the batch was written.
  cudaEvent_t ready() const { return ready_; }
  std::int64_t hardware_images() const { return hardware_images_; }
  std::int64_t fallback_images() const { return size() - hardware_images_; }

  void release();
  void release_after(ReuseFence fence);

 private:
  friend class GpuDecoder;
  std::shared_ptr<OutputPool> pool_;
  int slot_ = 0;
  torch::Tensor images_;
  torch::Tensor labels_;
  cudaEvent_t ready_ = nullptr;
  std::int64_t hardware_images_ = 0;
};

/// Delivers device batches of a split, in order, forever, like Loader (same order, same crop
/// windows and flips, same bad-image policy) with the decoding moved to the GPU.
///
/// Pipeline: the Loader's threads (options.workers) read each file and its JPEG header, draw the
/// crop and flip from the generator keyed by (seed, epoch, image), and stage the compressed bytes
/// in the page-locked ring (`SampleReader::stage`); images the engines cannot take (progressive,
/// CMYK, 4:1:1, ...: `hardware_route`) they decode on the CPU path instead. The stage's thread,
/// named `loader/gpu`, takes each staged batch, asks nvJPEG which images it accepts
/// (nvjpegDecodeBatchedSupportedEx with the crop as region of interest), decodes those with
/// nvjpegDecodeBatchedEx on the engines, decodes any it refused (or all of a batch it failed) on
/// the CPU, copies the CPU path's pixels in, and launches the resize kernel
/// (resize_normalize.h), all on its own non-blocking stream.
///
/// Ordering: the hardware decoder does not honour CUDA stream order (it may write before earlier
/// work queued on its stream has run), so it decodes only into buffers of a set whose previous
/// work the stage has waited for on the host (`reuse_fence`); the output buffers are written by
/// stream-ordered copies and kernels only.
///
/// Without JPEG engines (NVJPEG_STATUS_ARCH_MISMATCH, or use_engines false) the loader threads
/// decode every image on the CPU path and the stage copies the batches to the device; `info()`
/// says so once. The CPU path rather than nvJPEG's hybrid backend: it is what the batches are
/// compared with, it takes every kind of JPEG, and nvJPEG documents hybrid mis-decodes.
///
/// Threads: next(), reset() and stop() are for one consumer thread; cancel(), stats() and info()
/// may be called from any. A failure on the stage's thread is rethrown by next() when the consumer
/// reaches it (DataErrors keep their type); the decoder then stays failed.
class GpuDecoder {
 public:
  /// Creates the nvJPEG handle, the stage's buffers and thread, and the Loader.
  /// \throws std::invalid_argument for invalid options; DataError as Loader; std::runtime_error
  ///         when CUDA or nvJPEG fail.
  GpuDecoder(std::shared_ptr<const Food101Index> index, LoaderOptions options,
             GpuDecodeOptions gpu = {});
  ~GpuDecoder();
  GpuDecoder(const GpuDecoder&) = delete;
  GpuDecoder& operator=(const GpuDecoder&) = delete;

  /// Blocks until the next batch in order is on the device.
  /// \throws as Loader::next (Cancelled after cancel()), or std::runtime_error for CUDA / nvJPEG
  ///         failures.
  DeviceBatch next();
  /// Starts a new traversal as Loader::reset does: the next batch is the first of the epoch after
  /// the last one the consumer took a batch from; batches decoded ahead are dropped.
  void reset();
  /// Makes a blocked or later next() throw Cancelled. Any thread.
  void cancel();
  /// Stops and joins the stage and the loader. Idempotent; called by the destructor.
  void stop();

  const Loader& loader() const { return *loader_; }
  const LoaderOptions& options() const { return options_; }
  const GpuDecodeInfo& info() const { return info_; }
  GpuDecodeStats stats() const;

 private:
  struct Engine;  // nvJPEG and the stage's CUDA resources (gpu_decoder.cpp)
  struct Item {
    DeviceBatch batch;
    std::exception_ptr error;
  };

  void stage_main();
  void count_fallback(const std::string& reason, std::int64_t images);

  LoaderOptions options_;
  GpuDecodeOptions gpu_;
  GpuDecodeInfo info_;
  std::unique_ptr<Engine> engine_;
  std::shared_ptr<OutputPool> pool_;
  std::unique_ptr<Loader> loader_;

  mutable std::mutex mu_;
  std::condition_variable ready_cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  bool cancelled_ = false;
  std::exception_ptr failure_;
  std::uint64_t generation_ = 0;      // bumped by reset()
  std::int64_t reset_epoch_ = 0;      // the epoch the last reset() asked for
  std::int64_t traversal_epoch_ = 0;  // first epoch of the consumer's traversal
  std::int64_t last_taken_epoch_ = -1;

  mutable std::mutex stats_mu_;
  GpuDecodeStats stats_;
  std::thread thread_;
};

}  // namespace data_pipeline::gpu
