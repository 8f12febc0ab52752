// The training step's NVTX tree, written once: which phases a step of a run opens, in order.
#pragma once

#include <string>
#include <vector>

#include "lib/config/train_config.h"

namespace workload {

/// A phase of the step that a step executor runs (lib/step/step_executor.h). Its range name is
/// range_name(phase), from the vocabulary of lib/instrument/nvtx.h.
enum class StepPhase {
  kNormalize,      ///< uint8 batches to normalised float32, on the device
  kForward,        ///< forward and loss
  kZeroGrad,       ///< the gradients set to none
  kBackward,       ///< backward (DDP's all-reduces launched from its hooks)
  kOptimizerStep,  ///< SGD's update
  kGraphReplay,    ///< every phase above, replayed from a CUDA graph
};

/// The phase's NVTX range name ("forward"); the pointer is static.
const char* range_name(StepPhase phase);

/// The phases of one step beyond the fixed skeleton. Trainer::step opens
///
///   torch_step { data_load { batch_wait, h2d_submit, <load...> }, <device...>, [loss_item] }
///
/// with loss_item only under --sync-every-step: batch_wait and h2d_submit belong to the input
/// source, the listed phases to the step executor. Nothing else writes the tree.
struct StepPlan {
  std::vector<StepPhase> load;    ///< inside data_load, after h2d_submit
  std::vector<StepPhase> device;  ///< after data_load
  /// Every range a step opens inside torch_step, in the order they open: what --inject-stall
  /// may name.
  std::vector<std::string> ranges(const TrainConfig& config) const;
};

/// The eager step: normalize (uint8 batches) in data_load, then forward and, in train mode,
/// zero_grad, backward and optimizer_step.
StepPlan eager_plan(const TrainConfig& config);
/// --cuda-graph's captured steps: graph_replay in place of every device phase of the eager step.
StepPlan graph_plan(const TrainConfig& config);
/// The plan of `config`'s captured steps (warm-up steps may differ: a graph run warms up eagerly).
StepPlan captured_plan(const TrainConfig& config);

/// captured_plan(config).ranges(config): the ranges --inject-stall may name.
std::vector<std::string> step_ranges(const TrainConfig& config);

}  // namespace workload
