// --cuda-graph: the eager step captured once into a CUDA graph and replayed
// (lib/step/graph_step.h).
#include "lib/step/graph_step.h"

#include <torch/version.h>

#include <chrono>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "lib/core/build_features.h"
#include "lib/device/autocast_guard.h"
#include "lib/device/cuda_device.h"
#include "lib/distributed/data_parallel.h"
#include "lib/instrument/nvtx.h"

#if defined(WORKLOAD_TORCH_CUDA)
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>

#include "common/cuda_check.h"
#endif

// --cuda-graph-memsets kernels: the graph is rewritten between capture and instantiation, which
// needs lib/step/graph (a CUDA compiler) and CUDAGraph(keep_graph) (LibTorch 2.8 and later): CMake
// defines WORKLOAD_HAVE_GRAPH_REWRITE when both are there (Feature::kGraphMemsetRewrite).
#if defined(WORKLOAD_HAVE_GRAPH_REWRITE)
#define WORKLOAD_GRAPH_MEMSET_REWRITE 1
#include "lib/step/graph/memset_rewrite.h"
#endif

namespace workload {

namespace dp = data_pipeline;

#if defined(WORKLOAD_TORCH_CUDA)
struct GraphStep::Graph {
#if defined(WORKLOAD_GRAPH_MEMSET_REWRITE)
  at::cuda::CUDAGraph graph{/*keep_graph=*/true};  // readable between capture_end and instantiate
#else
  at::cuda::CUDAGraph graph;
#endif
  StepInputs inputs;   // the static inputs every replay reads
  torch::Tensor loss;  // the static output each replay writes
};
#else
struct GraphStep::Graph {};
#endif

GraphStep::GraphStep(const StepContext& ctx, std::unique_ptr<EagerStep> eager)
    : config_(ctx.config),
      device_(ctx.device),
      ddp_(ctx.ddp),
      eager_(std::move(eager)),
      replay_plan_(graph_plan(ctx.config)) {
  if (config_.cuda_graph_memsets == GraphMemsets::kKernels &&
      !built(Feature::kGraphMemsetRewrite)) {
    ctx.notices.push_back(
        "--cuda-graph-memsets kernels: this build cannot rewrite a graph before instantiating it "
        "(" +
        missing_reason(Feature::kGraphMemsetRewrite) + "): memset nodes are replayed as captured");
  }
}

GraphStep::~GraphStep() = default;

const StepPlan& GraphStep::plan() const { return graph_ ? replay_plan_ : eager_->plan(); }

torch::Tensor GraphStep::loss() const {
#if defined(WORKLOAD_TORCH_CUDA)
  if (replayed_) return graph_->loss;
  if (graph_) return warmup_loss_;  // the last step run's until a replay writes the graph's
#endif
  return eager_->loss();
}

void GraphStep::feed(StepInputs& inputs) {
  if (!graph_) {
    if (inputs.persistent) persistent_ = inputs;  // the capture may read these in place
    return;
  }
#if defined(WORKLOAD_TORCH_CUDA)
  StepInputs& fixed = graph_->inputs;
  if (inputs.images.is_same(fixed.images)) return;  // --synthetic: the graph reads it itself
  if (inputs.images.sizes() != fixed.images.sizes() ||
      inputs.labels.sizes() != fixed.labels.sizes()) {
    std::ostringstream what;
    what << "--cuda-graph: a batch of images " << inputs.images.sizes() << " and labels "
         << inputs.labels.sizes() << " does not fit the graph, captured for "
         << fixed.images.sizes() << " and " << fixed.labels.sizes();
    throw std::runtime_error(what.str());
  }
  // On the step's stream, after the previous replay, which reads them until its backward ends.
  fixed.images.copy_(inputs.images, /*non_blocking=*/true);
  fixed.labels.copy_(inputs.labels, /*non_blocking=*/true);
#endif
}

void GraphStep::run(StepPhase phase, StepInputs& inputs) {
  if (!graph_) return eager_->run(phase, inputs);
#if defined(WORKLOAD_TORCH_CUDA)
  if (phase == StepPhase::kGraphReplay) {
    graph_->graph.replay();
    replayed_ = true;
    return;
  }
#endif
  throw std::logic_error(std::string("GraphStep: no phase ") + range_name(phase));
}

Preparation GraphStep::prepare() {
  const std::string failed = "--cuda-graph: capturing the step failed in ";
  Preparation facts;
  try {
    capture(facts);
  } catch (const c10::Error& e) {
    throw std::runtime_error(failed + tracker_.current + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw std::runtime_error(failed + tracker_.current + ": " + e.what());
  }
  return facts;
}

void GraphStep::capture(Preparation& facts) {
  const auto t = std::chrono::steady_clock::now();
  Phase range(nvtx::kGraphCapture, &tracker_);
#if defined(WORKLOAD_TORCH_CUDA)
  auto graph = std::make_unique<Graph>();
  graph->inputs = static_inputs();
  if (ddp_ && config_.mode == RunMode::kTrain) ddp_->before_capture();
  // The capture records work; it runs none. zero_grad inside it drops the warm-up's gradients,
  // so backward allocates the gradients in the graph's memory pool, the same addresses every
  // replay, where optimizer_step reads them.
  device_synchronize();
  // The eager steps' cached blocks back to the device, so the graph's pool can take their memory
  // (as torch.cuda.graph empties the cache before capturing).
  c10::cuda::CUDACachingAllocator::emptyCache();
  warmup_loss_ = eager_->loss();
  record(*graph);
  instantiate(*graph, facts);
  graph->loss = eager_->loss();  // the captured step's: each replay rewrites it
  graph_ = std::move(graph);
#else
  throw std::runtime_error("this build has no CUDA (CUDA graphs need --device cuda)");
#endif
  facts.graph_capture_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

#if defined(WORKLOAD_TORCH_CUDA)
StepInputs GraphStep::static_inputs() const {
  if (persistent_.images.defined()) return persistent_;  // made once on the device: already static
  const dp::LoaderOptions& lo = config_.loader;
  const auto s = lo.transform.image_size;
  const auto options = torch::TensorOptions().device(device_);
  StepInputs in;
  in.images = torch::empty(
                  {lo.batch_size, 3, s, s},
                  options.dtype(lo.transform.dtype == dp::HostDType::kUInt8 ? torch::kUInt8
                                                                            : torch::kFloat32),
                  lo.transform.layout == dp::ImageLayout::kNchw ? torch::MemoryFormat::Contiguous
                                                                : torch::MemoryFormat::ChannelsLast)
                  .zero_();
  in.labels = torch::zeros({lo.batch_size}, options.dtype(torch::kInt64));
  return in;
}

void GraphStep::record(Graph& graph) {
  std::optional<AutocastCacheOff> no_cast_cache;
  if (config_.precision != Precision::kFp32) no_cast_cache.emplace();
#if TORCH_VERSION_MAJOR >= 2
  // Thread-local capture mode: the loader's threads and the GPU decode stage keep running, and
  // may make CUDA calls a global-mode capture would forbid them (other streams, not this one).
  graph.graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
#else
  graph.graph.capture_begin();  // 1.x: global mode only
#endif
  try {
    StepInputs inputs = graph.inputs;
    const StepPlan& eager = eager_->plan();
    run_phases(*eager_, eager.load, inputs, &tracker_);
    run_phases(*eager_, eager.device, inputs, &tracker_);
  } catch (...) {
    // End the capture (invalidated or not) so the stream is usable for the error's clean-up.
    try {
      graph.graph.capture_end();
    } catch (...) {
    }
    throw;
  }
  graph.graph.capture_end();
}

void GraphStep::instantiate(Graph& graph, Preparation& facts) {
#if defined(WORKLOAD_GRAPH_MEMSET_REWRITE)
  // A limit of 0 rewrites nothing and counts the memset nodes.
  const MemsetRewrite rewrite = rewrite_memsets(
      graph.graph.raw_cuda_graph(),
      config_.cuda_graph_memsets == GraphMemsets::kKernels ? kMaxRewrittenMemsetBytes : 0);
  graph.graph.instantiate();
  // Otherwise the first replay would upload the graph inside the capture window.
  WORKLOAD_CUDA_CHECK(cudaGraphUpload(graph.graph.raw_cuda_graph_exec(),
                                      c10::cuda::getCurrentCUDAStream().stream()));
  device_synchronize();
  facts.graph_memset_kernels = rewrite.kernels;
  facts.graph_memset_nodes = rewrite.kept;
#else
  (void)graph;
  (void)facts;  // instantiated by the first replay; the counts stay -1
#endif
}
#endif

}  // namespace workload
