// How a training step's device work runs: the interface the Trainer calls, and the factory that
// picks an executor for a run.
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "lib/foreach_sgd.h"
#include "lib/input_source.h"
#include "lib/resnet50.h"
#include "lib/run_result.h"
#include "lib/step_plan.h"
#include "lib/train_config.h"

namespace workload {

class DataParallel;

/// One way of running the step's device work. The Trainer opens each phase of plan() in the step
/// tree (lib/step_plan.h) and calls run() inside it; feed() inside h2d_submit, once the input
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
  virtual void prepare(RunResult& result) { (void)result; }
};

/// What an executor is built from; the model, optimizer and data parallelism outlive it.
struct StepContext {
  const TrainConfig& config;
  ResNet50 model;
  ForeachSgd& optimizer;
  DataParallel* ddp = nullptr;  ///< DDP's hooks in forward, when distributed
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
