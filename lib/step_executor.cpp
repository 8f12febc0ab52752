// The factory of the step's executors (lib/step_executor.h).
#include "lib/step_executor.h"

#include "lib/eager_step.h"
#include "lib/graph_step.h"
#include "lib/usage_error.h"

namespace workload {

std::unique_ptr<StepExecutor> make_step_executor(const StepContext& ctx) {
  auto eager = std::make_unique<EagerStep>(ctx);
  if (!ctx.config.cuda_graph) return eager;
  return std::make_unique<GraphStep>(ctx, std::move(eager));
}

void check_step_executor(const TrainConfig& config, bool distributed) {
  if (distributed && config.cuda_graph) {
    // DDP's reducer launches its all-reduces from autograd hooks as buckets fill, and reads the
    // buckets' state on the host between steps: not a fixed sequence to replay.
    throw UsageError(
        "--cuda-graph: not supported in a distributed run (torchrun); drop one of the two");
  }
}

bool executor_wants_own_stream(const TrainConfig& config) { return config.cuda_graph; }

}  // namespace workload
