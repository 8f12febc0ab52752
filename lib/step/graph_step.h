// --cuda-graph: the eager step captured once into a CUDA graph after the warm-up and replayed every
// captured step, reading static inputs.
#pragma once

#include <memory>

#include "lib/instrument/phase.h"
#include "lib/step/eager_step.h"

namespace workload {

/// A wrapper with static inputs around the eager step, as torch.cuda.make_graphed_callables is.
///
/// Warm-up steps run eagerly (the eager plan). prepare(), after the warm-up and before the capture
/// window, records the eager step's device work (normalize for uint8 batches, forward, zero_grad,
/// backward, optimizer_step, each in its range inside `graph_capture`) into one graph that reads
/// static image and label tensors, rewrites its small memset nodes into kernel nodes as
/// --cuda-graph-memsets says (lib/step/graph/memset_rewrite.h, where this build can), instantiates
/// and uploads it. From then on the plan is graph_plan: feed() copies each batch into the static
/// inputs (device to device, on the current stream, inside h2d_submit; none when the batch is the
/// static one, as with --synthetic), and graph_replay launches the graph. The capture runs nothing
/// of the step on the device. One thread; the step's stream must not be the legacy default stream
/// (executor_wants_own_stream).
///
/// Under DDP (`ctx.ddp`) the captured step holds DDP's device work too, as PyTorch's notes on CUDA
/// graphs describe it: the buffers' broadcast before forward (with --broadcast-buffers and more
/// than one rank), each gradient bucket's copy and NCCL all-reduce launched from backward's hooks
/// as the bucket fills (so a replay overlaps them with the rest of backward as eager does), and
/// the copies back into the gradients before optimizer_step. Every rank captures the same step
/// (the warm-up is the same length everywhere) after DataParallel::before_capture, and replays it
/// in lockstep: a replay is a collective of the ranks that captured it. Collectives replayed from
/// a graph are not watched by PyTorch's NCCL watchdog; this project's liveness
/// (lib/distributed/watchdog.h) does not depend on it.
class GraphStep final : public StepExecutor {
 public:
  /// `eager`: the step to capture, run eagerly until then. Adds a notice to `ctx.notices` where
  /// this build replays memset nodes as captured whatever --cuda-graph-memsets says.
  GraphStep(const StepContext& ctx, std::unique_ptr<EagerStep> eager);
  ~GraphStep() override;

  const StepPlan& plan() const override;
  void feed(StepInputs& inputs) override;
  void run(StepPhase phase, StepInputs& inputs) override;
  torch::Tensor loss() const override;
  bool has_preparation() const override { return true; }
  /// The capture (a `graph_capture` range): its time and memset counts.
  /// \throws std::runtime_error "--cuda-graph: capturing the step failed in <phase>: ...".
  Preparation prepare() override;

 private:
  struct Graph;  // the captured graph and its static tensors (CUDA builds)
  void capture(Preparation& facts);
  /// The tensors the graph reads: the source's own when persistent, else zeroed ones shaped by the
  /// config.
  StepInputs static_inputs() const;
  /// Records the eager plan's device work into `graph`, each phase in its range.
  void record(Graph& graph);
  /// Rewrites the memset nodes (where this build can), instantiates and uploads `graph`.
  void instantiate(Graph& graph, Preparation& facts);

  const TrainConfig& config_;
  torch::Device device_;
  DataParallel* ddp_;  // DDP's hooks, captured with the step; null outside a distributed run
  std::unique_ptr<EagerStep> eager_;
  StepPlan replay_plan_;
  StepInputs persistent_;  // the source's batch when the same tensors come every step
  PhaseTracker tracker_;   // the capture's phases, for its error message
  std::unique_ptr<Graph> graph_;
  torch::Tensor warmup_loss_;  // the eager loss, until the first replay
  bool replayed_ = false;
};

}  // namespace workload
