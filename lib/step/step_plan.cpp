// The training step's NVTX tree, written once (lib/step/step_plan.h).
#include "lib/step/step_plan.h"

#include <stdexcept>

#include "lib/instrument/nvtx.h"

namespace workload {

const char* range_name(StepPhase phase) {
  switch (phase) {
    case StepPhase::kNormalize:
      return nvtx::kNormalize;
    case StepPhase::kForward:
      return nvtx::kForward;
    case StepPhase::kZeroGrad:
      return nvtx::kZeroGrad;
    case StepPhase::kBackward:
      return nvtx::kBackward;
    case StepPhase::kOptimizerStep:
      return nvtx::kOptimizerStep;
    case StepPhase::kGraphReplay:
      return nvtx::kGraphReplay;
  }
  throw std::logic_error("range_name: unknown StepPhase");
}

std::vector<std::string> StepPlan::ranges(const TrainConfig& config) const {
  std::vector<std::string> out = {nvtx::kDataLoad, nvtx::kBatchWait, nvtx::kH2dSubmit};
  for (StepPhase p : load) out.push_back(range_name(p));
  for (StepPhase p : device) out.push_back(range_name(p));
  if (config.sync_every_step) out.push_back(nvtx::kLossItem);
  return out;
}

StepPlan eager_plan(const TrainConfig& c) {
  StepPlan plan;
  if (c.loader.transform.dtype == data_pipeline::HostDType::kUInt8) {
    plan.load.push_back(StepPhase::kNormalize);
  }
  plan.device.push_back(StepPhase::kForward);
  if (c.mode == RunMode::kTrain) {
    plan.device.insert(plan.device.end(),
                       {StepPhase::kZeroGrad, StepPhase::kBackward, StepPhase::kOptimizerStep});
  }
  return plan;
}

StepPlan graph_plan(const TrainConfig&) {
  StepPlan plan;
  plan.device.push_back(StepPhase::kGraphReplay);  // holds the device work of every eager phase
  return plan;
}

StepPlan captured_plan(const TrainConfig& c) {
  return c.cuda_graph ? graph_plan(c) : eager_plan(c);
}

std::vector<std::string> step_ranges(const TrainConfig& c) { return captured_plan(c).ranges(c); }

}  // namespace workload
