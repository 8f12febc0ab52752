// DistributedDataParallel's gradient synchronisation on c10d's Reducer, over a rank's process group
// (lib/distributed/distributed.h), and the digest that shows the replicas in sync.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace workload {

class Distributed;

/// The first gradient bucket's size once DDP rebuilds its buckets (Python DDP's 1 MiB).
inline constexpr std::int64_t kFirstBucketBytes = std::int64_t{1} << 20;

/// The eager DDP iterations a CUDA graph of the step needs before its capture: the Reducer rebuilds
/// its buckets after the first and times its first 10 with CUDA events, and PyTorch's notes on
/// CUDA graphs ask for 11 ("Usage with DistributedDataParallel"). --warmup's default with
/// --cuda-graph.
inline constexpr int kDdpGraphWarmup = 11;

/// DistributedDataParallel's gradient synchronisation on c10d's Reducer, as Python's DDP sets it
/// up: the parameters' shapes checked across ranks, parameters and buffers broadcast from rank 0,
/// the first iteration in one bucket, then buckets of `bucket_bytes` (the first 1 MiB) rebuilt in
/// the order gradients became ready; each bucket's all-reduce (the mean over ranks) launched from
/// autograd's hooks while backward still runs. With `broadcast_buffers`, the buffers (BatchNorm's
/// running statistics) are broadcast from rank 0 before each forward, as DDP's default.
///
/// Construct after the model is on its device and in its memory format. One thread.
class DataParallel {
 public:
  /// `gradient_as_bucket_view`: DDP's option of that name (each gradient a view of its bucket
  /// once copied in, so nothing is copied back after the all-reduce).
  DataParallel(Distributed& dist, torch::nn::Module& model, std::int64_t bucket_bytes,
               bool broadcast_buffers, bool gradient_as_bucket_view = false);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  /// Inside the forward phase, before the model runs: rebuilds the buckets after the first
  /// iteration (a collective), broadcasts the buffers, marks the iteration's start.
  void before_forward();
  /// After the model's forward, when a backward follows: arms the reduction of every parameter's
  /// gradient (every parameter takes part in every iteration: no search for unused ones).
  void before_backward();

  /// The training iterations run so far (forwards with a backward to follow).
  std::int64_t iterations() const;
  /// Before the next training iteration is captured into a CUDA graph (lib/step/graph_step.h): the
  /// Reducer times no iteration with CUDA events from now on (nothing here reads those timings;
  /// Python's DDP logger does), so the captured one records only the step's device work: the
  /// bucket copies and their all-reduces, launched as buckets fill while backward runs, and the
  /// copies back into the gradients. Replays run exactly that; the Reducer's host bookkeeping
  /// runs once, during the capture, and never again.
  /// \throws std::runtime_error when fewer than kDdpGraphWarmup iterations ran eagerly.
  void before_capture();

 private:
  struct State;  // the Reducer (c10d builds)
  Distributed& dist_;
  bool broadcast_buffers_;
  std::vector<torch::Tensor> buffers_;
  std::unique_ptr<State> state_;
};

/// A 64-bit digest of every parameter's bytes, in order (equal on every rank when the replicas are
/// in sync). Copies each to the host: call after the device is drained.
std::uint64_t parameter_digest(const torch::nn::Module& model);

}  // namespace workload
