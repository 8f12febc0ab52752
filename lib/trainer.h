// The training workload: ResNet-50 steps with the article's NVTX ranges and a capture window.
#pragma once

#include <torch/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data_pipeline/food101_index.h"
#include "data_pipeline/loader.h"
#include "lib/cuda_device.h"
#include "lib/dist_env.h"
#include "lib/foreach_sgd.h"
#include "lib/resnet50.h"
#include "lib/train_config.h"

namespace workload {

class Distributed;
class DataParallel;

/// Host-side facts of one training step (no device values: nothing here synchronizes).
struct StepRecord {
  int index = 0;  ///< 0-based within its phase (warm-up or capture)
  bool warmup = false;
  double batch_wait_ms = 0;  ///< inside batch_wait: blocked on the loader
  double h2d_submit_ms = 0;  ///< inside h2d_submit: issuing the copies
  double step_ms = 0;        ///< the whole torch_step range
  std::uint64_t digest = 0;  ///< digest of the batch's host label and image bytes
  std::int64_t epoch = 0;
  std::int64_t batch_in_epoch = 0;
  std::vector<data_pipeline::SkippedImage> skipped;
  std::optional<double> loss;                  ///< read every step only with --sync-every-step
  std::vector<InjectedStall> injected_stalls;  ///< --inject-stall sleeps made in this step
};

/// What a run produced.
struct RunResult {
  std::vector<StepRecord> warmup_steps;
  std::vector<StepRecord> steps;  ///< captured steps
  double elapsed_s = 0;           ///< capture_window start through the end of capture_drain
  double images_per_s = 0;
  double iterator_reset_ms = 0;
  double capture_drain_ms = 0;
  double profiler_stop_ms = 0;  ///< inside cudaProfilerStop: under nsys, the capture's hand-over
  /// --cuda-graph: the capture after the warm-up (recording, rewriting, instantiating and uploading
  /// the graph; it runs nothing of the step on the device), outside the capture window.
  std::optional<double> graph_capture_ms;
  /// --cuda-graph: the captured memset nodes rewritten into kernel nodes (--cuda-graph-memsets
  /// kernels), and those replayed as memset nodes; both -1 where this build cannot read the graph
  /// before instantiating it (no CUDA compiler, or LibTorch before 2.8).
  int graph_memset_kernels = -1;
  int graph_memset_nodes = -1;
  std::optional<double> loss_after_drain;
  bool capture_started = false;
  std::string torch_trace;  ///< the Chrome trace written, if one was asked for
  bool interrupted = false;
  std::string interrupt_signal;  ///< With `interrupted`: signal_name() of request_stop's value.
  /// Distributed runs: who asked the ranks to stop and why ("rank 1: SIGTERM"), when they did.
  std::string stop_agreed_by;
  /// Distributed runs: digest of every parameter after the drain (equal on every rank when the
  /// replicas are in sync).
  std::optional<std::uint64_t> parameter_digest;
};

/// "SIGINT", "SIGTERM", "signal N", or "none" for 0 (a stop requested without a signal).
std::string signal_name(int signal);
/// The inverse of signal_name (0 for "none" or anything else).
int signal_number(const std::string& name);

/// Builds the dataset index, loader, model and optimizer for `config`, then runs warm-up and
/// the captured steps. Single-threaded use from the thread that created it (the "main thread"
/// of the NVTX tree); the loader's workers are its own.
///
/// The step is exactly:
///   torch_step { data_load { batch_wait, h2d_submit }, forward, zero_grad, backward,
///                optimizer_step }
/// with, only when their flags ask for them: `normalize` after h2d_submit (--host-dtype uint8),
/// per-stage and per-block ranges inside forward (--nvtx-detail layers), no zero_grad, backward
/// or optimizer_step (--mode forward), and `loss_item` last (--sync-every-step). In a distributed
/// run the tree is the same; DDP's own work shows in the `ddp` domain (lib/nvtx.h).
/// With --cuda-graph the step is
///   torch_step { data_load { batch_wait, h2d_submit }, graph_replay }
/// (plus `loss_item` with --sync-every-step): after the warm-up, in a `graph_capture` range before
/// the capture window, the device work of normalize, forward, zero_grad, backward and
/// optimizer_step is captured once into a CUDA graph that reads static image and label tensors;
/// h2d_submit copies the batch into them (device to device, after the host-to-device copies as
/// usual) and graph_replay launches the graph.
/// The capture is: warm-up steps, device synchronize, cudaProfilerStart, capture_window {
/// [iterator_reset], steps, capture_drain }, cudaProfilerStop. Nothing inside the window waits for
/// the device before capture_drain.
class Trainer {
 public:
  /// With `dist` (a launcher's environment, lib/dist_env.h) the trainer is one rank of a
  /// data-parallel run: it rendezvouses with the others, runs on GPU LOCAL_RANK, reads its shard of
  /// the data, and averages gradients as DDP does (lib/distributed.h).
  /// \throws UsageError for configurations validate() rejects (e.g. --device cuda without a GPU),
  ///         data_pipeline::DataError for dataset problems, std::runtime_error when the
  ///         rendezvous fails.
  explicit Trainer(TrainConfig config, std::optional<DistEnv> dist = std::nullopt);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Called after every step with its host-side record (for progress lines).
  using Progress = std::function<void(const StepRecord&)>;

  /// Runs warm-up and capture. After request_stop() the run ends at the next step boundary (or at
  /// once when waiting for a batch): the device is drained, a started capture is stopped and the
  /// result is marked interrupted. A failure inside a step is rethrown with the step and the
  /// phase it happened in (DataErrors keep their type).
  RunResult run(const Progress& progress = nullptr);

  /// Asks a running run() to stop, giving the signal number for the report (0 if none). Safe to
  /// call from any thread, e.g. a signal-handling one; returns immediately. A single process stops
  /// at once (a step waiting for its batch is cut short); the ranks of a distributed run agree, at
  /// their next step boundary, on a step they all stop before (Distributed::agreed_stop).
  void request_stop(int signal = 0);
  /// The value given to request_stop(), or -1 when none was requested.
  int stop_requested() const { return stop_requested_.load(); }
  /// The signal the run stopped for: this process's request_stop() value, or in a distributed run
  /// the one another rank stopped for (0 for a request without a signal, -1 when none). The
  /// trainer's thread, after run().
  int stop_signal() const;

  const TrainConfig& config() const { return config_; }
  const ResNet50& model() const { return model_; }
  std::int64_t num_classes() const { return num_classes_; }
  std::int64_t parameters() const;
  bool on_cuda() const { return device_.is_cuda(); }
  /// Images in the split (0 in synthetic mode).
  std::int64_t dataset_images() const { return index_ ? index_->size() : 0; }
  /// The loader, or nullptr in synthetic mode. Under --decode gpu, the GPU stage's own loader
  /// (the threads that read and stage the files).
  const data_pipeline::Loader* loader() const;
  /// Under --decode gpu, the GPU stage's counters as JSON (engines, hardware and fallback images,
  /// fallback reasons); null otherwise.
  nlohmann::ordered_json gpu_decode_report() const;
  /// The data-parallel membership and gradient synchronisation, or nullptr for a single process.
  const Distributed* distributed() const { return dist_.get(); }
  const DataParallel* data_parallel() const { return ddp_.get(); }
  /// One line per notice worth printing once (e.g. pinning unavailable, profiler skipped).
  const std::vector<std::string>& notices() const { return notices_; }

 private:
  StepRecord step(int index, bool warmup);
  bool stop_at_boundary();
  void submit(data_pipeline::Batch& batch, torch::Tensor& images, torch::Tensor& labels);
  void zero_grad();
  torch::Tensor forward(const torch::Tensor& images);
  torch::Tensor normalize(const torch::Tensor& images) const;
  /// The step's device work on a batch already on the device: forward, zero_grad, backward and
  /// optimizer_step (as the mode has them), each in its range, calling `stall` (if any) with the
  /// range's name at its start.
  void compute(const torch::Tensor& images, const torch::Tensor& labels,
               const std::function<void(const char*)>& stall);
  /// --cuda-graph: records compute() (after normalize, for uint8 batches) into graph_, reading its
  /// static inputs, rewrites its memset nodes as --cuda-graph-memsets says and instantiates it.
  /// Fills the result's graph_* fields.
  void capture_graph(RunResult& result);
  /// --cuda-graph: copies the step's batch into the graph's static inputs, on the compute stream
  /// (after the previous replay, which reads them until its backward ends).
  void feed_graph(const torch::Tensor& images, const torch::Tensor& labels);

  TrainConfig config_;
  torch::Device device_{torch::kCPU};
  std::vector<std::string> notices_;
  std::shared_ptr<const data_pipeline::Food101Index> index_;
  std::unique_ptr<data_pipeline::Loader> loader_;
  std::int64_t num_classes_ = 101;
  ResNet50 model_{nullptr};
  std::unique_ptr<ForeachSgd> optimizer_;
  torch::Tensor loss_;
  torch::Tensor synthetic_images_, synthetic_labels_;
  torch::Tensor norm_scale_, norm_bias_;  // uint8 -> normalised float, per channel (1x3x1x1)
  std::uint64_t synthetic_digest_ = 0;
  std::atomic<int> stop_requested_{-1};
  const char* phase_ = "";  // the innermost phase running (or that failed), for error messages
  struct CudaState;         // copy stream (CUDA builds only)
  std::unique_ptr<CudaState> cuda_;
  struct GpuInput;  // --decode gpu: the GPU decode stage and the batch the step holds
  std::unique_ptr<GpuInput> gpu_input_;
  struct Graph;  // --cuda-graph: the captured step and its static inputs (CUDA builds only)
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<Distributed> dist_;  // declared before ddp_: outlives it
  std::unique_ptr<DataParallel> ddp_;
  std::int64_t next_step_ = 0;  // warm-up and captured steps together, for the stop agreement
  bool stop_proposed_ = false;
};

}  // namespace workload
