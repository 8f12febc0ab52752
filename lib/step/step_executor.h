// How a training step's device work runs: the interface the Trainer calls, and the factory that
// picks an executor for a run.
#pragma once

#include <torch/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/config/train_config.h"
#include "lib/input/input_source.h"
#include "lib/instrument/phase.h"
#include "lib/model/foreach_sgd.h"
#include "lib/model/loss_scaler.h"
#include "lib/model/resnet50.h"
#include "lib/step/step_plan.h"

namespace workload {

class DataParallel;

/// What an executor's preparation did, for the run's record (the report's `capture` section).
struct Preparation {
  /// --cuda-graph: the capture after the warm-up (recording, rewriting, instantiating and uploading
  /// the graph; it runs nothing of the step on the device).
  std::optional<double> graph_capture_ms;
  /// --cuda-graph: the captured memset nodes rewritten into kernel nodes (--cuda-graph-memsets
  /// kernels), and those replayed as memset nodes; both -1 where this build cannot read the graph
  /// before instantiating it (lib/core/build_features.h, Feature::kGraphMemsetRewrite).
  int graph_memset_kernels = -1;
  int graph_memset_nodes = -1;
};

/// One way of running the step's device work. The Trainer opens each phase of plan() in the step
/// tree (lib/step/step_plan.h) and calls run() inside it; feed() inside h2d_submit, once the input
/// source put the batch on the device. prepare(), when has_preparation() says there is one, runs
/// once between the warm-up and the capture window. Everything on the trainer's thread.
class StepExecutor {
 public:
  virtual ~StepExecutor() = default;

  /// The phases of the next step (it may change between steps: a graph's warm-up is eager).
  virtual const StepPlan& plan() const = 0;
  /// Inside h2d_submit: takes the step's batch (e.g. copies it into a graph's static inputs).
  virtual void feed(StepInputs& inputs) { (void)inputs; }
  /// Runs `phase` of plan() on `inputs` (normalize replaces `inputs.images`). Queues device work;
  /// waits for none. \throws what the model, the optimizer or CUDA throw.
  virtual void run(StepPhase phase, StepInputs& inputs) = 0;
  /// The last step's loss, on the device (undefined before the first step).
  virtual torch::Tensor loss() const = 0;
  virtual bool has_preparation() const { return false; }
  /// \throws std::runtime_error saying what failed, naming the flag.
  virtual Preparation prepare() { return {}; }
};

/// Runs `phases` of `executor` on `inputs` in order, each inside its Phase (lib/instrument/phase.h:
/// its NVTX range, its profiler scope, `tracker` naming it): the one loop behind every step tree
/// (Trainer::step's and the graph's capture).
void run_phases(StepExecutor& executor, const std::vector<StepPhase>& phases, StepInputs& inputs,
                PhaseTracker* tracker);

/// What an executor is built from; the model, optimizer and data parallelism outlive it.
struct StepContext {
  const TrainConfig& config;
  ResNet50 model;
  ForeachSgd& optimizer;
  DataParallel* ddp = nullptr;  ///< DDP's hooks in forward, when distributed
  /// --precision fp16: the loss scaling of backward and the optimizer's step (null otherwise).
  LossScaler* scaler = nullptr;
  torch::Device device;
  std::vector<std::string>& notices;  ///< one line per notice worth printing once
};

/// The executor of `ctx.config`'s run: eager, or a CUDA graph of the eager step (--cuda-graph).
std::unique_ptr<StepExecutor> make_step_executor(const StepContext& ctx);

/// Refuses a configuration the executor cannot run, before any rendezvous: --cuda-graph in a
/// distributed run with Gloo, or in training with fewer than kDdpGraphWarmup (11) warm-up steps.
/// \throws UsageError naming the flag.
void check_step_executor(const TrainConfig& config, bool distributed);

/// Whether `config`'s executor needs the step on a stream other than the legacy default one (a
/// CUDA graph is captured on one). Asked before the model is on the device.
bool executor_wants_own_stream(const TrainConfig& config);

}  // namespace workload
