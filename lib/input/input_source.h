// Where a training step's batch comes from: the interface the Trainer calls, what it reports, and
// the factory that picks a source for a run.
#pragma once

#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data_pipeline/food101_index.h"
#include "data_pipeline/gpu_decode_stats.h"
#include "data_pipeline/loader.h"
#include "lib/config/train_config.h"

namespace workload {

/// A step's batch where the model reads it.
struct StepInputs {
  torch::Tensor images;  ///< N x 3 x S x S (channels_last or NCHW), float32 or uint8
  torch::Tensor labels;  ///< N int64
  /// The same tensors every step (synthetic batches): a CUDA graph may read them in place.
  bool persistent = false;
};

/// The host batch ring a source's loader threads fill (the report's `loader` section).
struct HostRingFacts {
  std::size_t slots = 0;
  std::size_t bytes = 0;
  bool pinned = false;
  std::int64_t batches_per_epoch = 0;
  std::int64_t images_skipped = 0;  ///< In every batch finished so far, delivered or ahead.
};

/// --decode gpu: what the GPU stage found at construction and has counted since.
struct GpuDecodeSummary {
  data_pipeline::GpuDecodeInfo info;
  data_pipeline::GpuDecodeStats stats;
};

/// One way of feeding the step. Per step the Trainer calls, on its own thread:
///   next()    inside batch_wait: wait for the next batch in order and take it;
///   info()    what that batch says about itself, for the step's record;
///   submit()  inside h2d_submit: put it on the model's device, ordered before the work queued next
///             on the current stream (no host wait for the device);
///   release_after_step()  once every kernel reading the batch is queued (after optimizer_step).
/// reset() starts a new traversal (iterator_reset), cancel() may come from any thread, stop() joins
/// the source's threads before the device resources go (the Trainer's destructor).
class InputSource {
 public:
  virtual ~InputSource() = default;

  /// \throws data_pipeline::Cancelled after cancel(); data_pipeline::DataError naming the file;
  ///         std::runtime_error for other failures of the source's threads.
  virtual void next() = 0;
  /// The batch taken by the last next(); valid until the next call of next().
  virtual const data_pipeline::BatchInfo& info() const = 0;
  virtual StepInputs submit() = 0;
  virtual void release_after_step() {}
  virtual void reset() {}
  /// reset(), the new traversal starting at `epoch` (a resumed run's next epoch).
  /// \throws std::logic_error for a source without epochs (synthetic batches).
  virtual void reset_to(std::int64_t epoch);
  /// Makes a blocked or later next() throw Cancelled. Any thread; returns at once.
  virtual void cancel() {}
  /// Idempotent.
  virtual void stop() {}

  /// The host ring, where loader threads fill one (not for synthetic batches).
  virtual std::optional<HostRingFacts> host_ring() const { return std::nullopt; }
  /// --decode gpu's counters (any thread).
  virtual std::optional<GpuDecodeSummary> gpu_decode() const { return std::nullopt; }
};

/// What a source is built from.
struct InputContext {
  const TrainConfig& config;
  std::shared_ptr<const data_pipeline::Food101Index> index;  ///< null for --synthetic
  torch::Device device;
  std::int64_t num_classes = 0;
  /// A rank's shard of the data in a distributed run (DistributedSampler's): this rank's index
  /// among `shard_count` ranks; one shard for a single process.
  int shard_count = 1;
  int shard_index = 0;
  std::vector<std::string>& notices;  ///< one line per notice worth printing once
};

/// The source of `ctx.config`'s run: synthetic batches, the GPU decode stage (--decode gpu), or
/// the host loader. \throws as the source's constructor (DataError, UsageError, runtime_error).
std::unique_ptr<InputSource> make_input_source(const InputContext& ctx);

/// Whether the step's kernels should run on a high-priority stream of their own for `config`'s
/// source (the GPU stage's kernels then fill the gaps between them rather than delay them).
/// Asked before the model is on the device: everything the step queues then shares one stream.
bool input_wants_priority_stream(const TrainConfig& config);

/// The CUDA_DEVICE_MAX_CONNECTIONS `config`'s source wants (lib/device/cuda_connections.h), 0
/// when CUDA's default will do: the GPU decode stage's on a CUDA device. make_input_source adds the
/// notice when the environment gives fewer.
int input_cuda_connections(const TrainConfig& config);

/// The notice for a ring that could not be page-locked, or "" when it is as asked.
std::string pinning_notice(bool requested, bool pinned, bool cuda);

}  // namespace workload
