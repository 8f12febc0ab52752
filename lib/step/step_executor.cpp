// The factory of the step's executors (lib/step/step_executor.h).
#include "lib/step/step_executor.h"

#include "lib/core/usage_error.h"
#include "lib/distributed/data_parallel.h"
#include "lib/step/eager_step.h"
#include "lib/step/graph_step.h"

namespace workload {

std::unique_ptr<StepExecutor> make_step_executor(const StepContext& ctx) {
  auto eager = std::make_unique<EagerStep>(ctx);
  if (!ctx.config.cuda_graph) return eager;
  return std::make_unique<GraphStep>(ctx, std::move(eager));
}

void check_step_executor(const TrainConfig& config, bool distributed) {
  if (!distributed || !config.cuda_graph) return;
  // A graph holds device work only: the all-reduces must be NCCL's, launched on the device.
  if (config.dist_backend != DistBackend::kNccl) {
    throw UsageError(std::string("--cuda-graph: a data-parallel graph needs --dist-backend nccl "
                                 "(Gloo's collectives run on the host, which a CUDA graph cannot "
                                 "replay); got --dist-backend ") +
                     to_string(config.dist_backend));
  }
  if (config.mode == RunMode::kTrain && config.warmup < kDdpGraphWarmup) {
    throw UsageError("--warmup " + std::to_string(config.warmup) +
                     ": a data-parallel --cuda-graph run needs " + std::to_string(kDdpGraphWarmup) +
                     " or more eager warm-up steps before its capture (DDP's Reducer rebuilds "
                     "its buckets after the first and times its first 10 with CUDA events)");
  }
}

void run_phases(StepExecutor& executor, const std::vector<StepPhase>& phases, StepInputs& inputs,
                PhaseTracker* tracker) {
  for (const StepPhase p : phases) {
    Phase range(range_name(p), tracker);
    executor.run(p, inputs);
  }
}

bool executor_wants_own_stream(const TrainConfig& config) { return config.cuda_graph; }

}  // namespace workload
