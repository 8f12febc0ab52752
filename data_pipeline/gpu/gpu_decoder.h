// The GPU decode stage (--decode gpu): nvJPEG's batched hardware decoder on the GPU's JPEG engines,
// each image cut to its RandomResizedCrop window by the decoder's region of interest, then one
// resize kernel that also flips, normalises and writes the channels-last batch on the device.
#pragma once

#include <cuda_runtime_api.h>
#include <torch/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "data_pipeline/batch_ring.h"
#include "data_pipeline/food101_index.h"
#include "data_pipeline/gpu/decode_counters.h"
#include "data_pipeline/gpu/output_pool.h"
#include "data_pipeline/gpu_decode_stats.h"
#include "data_pipeline/loader.h"
#include "data_pipeline/loader_options.h"
#include "data_pipeline/traversal_epochs.h"

namespace data_pipeline::gpu {

class BatchDecoder;

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
/// (resize_normalize.h), all on its own non-blocking stream: the stages of BatchDecoder
/// (batch_decoder.h), into the buffers of an OutputPool (output_pool.h).
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
  /// the last one the consumer took a batch from (or at `epoch` when given, as Loader::reset_to);
  /// batches decoded ahead are dropped. \throws std::invalid_argument for a negative epoch.
  void reset(std::optional<std::int64_t> epoch = std::nullopt);
  /// Makes a blocked or later next() throw Cancelled. Any thread.
  void cancel();
  /// Stops and joins the stage and the loader. Idempotent; called by the destructor.
  void stop();

  const Loader& loader() const { return *loader_; }
  const LoaderOptions& options() const { return options_; }
  const GpuDecodeInfo& info() const { return info_; }
  GpuDecodeStats stats() const;

 private:
  struct Item {
    DeviceBatch batch;
    std::exception_ptr error;
  };

  // The stage's thread: per batch, follow a pending reset, take the loader's next batch and a
  // free output buffer, decode (BatchDecoder), publish.
  void stage_main();
  // Passes a reset() the stage has not yet followed (`handled`: the generation it last followed)
  // on to the loader; returns the generation the next batch belongs to, nothing once stopping.
  std::optional<std::uint64_t> follow_reset(std::uint64_t& handled);
  // Queues `batch` for the consumer unless reset() or stop() came since `generation`, in which
  // case it is dropped and its buffer returns to the pool.
  void publish(DeviceBatch batch, std::uint64_t generation);

  LoaderOptions options_;
  GpuDecodeOptions gpu_;
  GpuDecodeInfo info_;
  DecodeCounters counters_;
  // Declared so that they go in this order: the loader, then the pool (with the last batch
  // decoder's reference), the stage's CPU reader, nvJPEG and the stream.
  std::unique_ptr<BatchDecoder> decoder_;
  std::shared_ptr<OutputPool> pool_;
  std::unique_ptr<Loader> loader_;

  mutable std::mutex mu_;
  std::condition_variable ready_cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  bool cancelled_ = false;
  std::exception_ptr failure_;
  std::uint64_t generation_ = 0;  // bumped by reset()
  TraversalEpochs epochs_;        // the consumer's traversal: its first epoch, the last taken
  std::thread thread_;
};

}  // namespace data_pipeline::gpu
