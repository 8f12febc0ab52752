// The training workload: ResNet-50 steps with the article's NVTX ranges and a capture window.
#include "lib/trainer.h"

#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/nn/functional/loss.h>
#include <torch/version.h>

#include <csignal>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "data_pipeline/data_error.h"
#include "data_pipeline/hash64.h"
#include "lib/autocast_guard.h"
#include "lib/distributed.h"
#include "lib/nvtx.h"
#include "lib/phase.h"
#include "lib/torch_trace.h"

#if defined(WORKLOAD_HAVE_NVJPEG)
#include "data_pipeline/gpu/gpu_decoder.h"
#endif

#if defined(WORKLOAD_TORCH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include "data_pipeline/cuda_check.h"
#endif

// --cuda-graph-memsets kernels: the graph is rewritten between capture and instantiation, which
// needs lib/graph (a CUDA compiler) and CUDAGraph(keep_graph) (LibTorch 2.8 and later).
#if defined(WORKLOAD_TORCH_CUDA) && defined(WORKLOAD_HAVE_GRAPH_REWRITE) && \
    (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 8))
#define WORKLOAD_GRAPH_MEMSET_REWRITE 1
#include "lib/graph/memset_rewrite.h"
#endif

namespace workload {

namespace dp = data_pipeline;
using Clock = std::chrono::steady_clock;

namespace {
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
}  // namespace

std::string signal_name(int signal) {
  switch (signal) {
    case 0:
      return "none";
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "signal " + std::to_string(signal);
  }
}

int signal_number(const std::string& name) {
  if (name == "SIGINT") return SIGINT;
  if (name == "SIGTERM") return SIGTERM;
  if (name.rfind("signal ", 0) == 0) return std::stoi(name.substr(7));
  return 0;
}

#if defined(WORKLOAD_TORCH_CUDA)
struct Trainer::CudaState {
  c10::cuda::CUDAStream copy_stream;
  // --decode gpu: the step's kernels on a high-priority stream for the trainer's lifetime, so the
  // GPU decode stage's kernels (the resize, nvJPEG's colour conversion) fill the gaps between them
  // rather than delay them. --cuda-graph: a graph is captured on a stream other than the legacy
  // default one, and the eager warm-up runs on the stream the capture will use (as PyTorch's
  // recipe warms up on its side stream): cuBLAS's per-stream workspace, for one, then exists.
  std::optional<c10::cuda::CUDAStreamGuard> compute;
  explicit CudaState(c10::cuda::CUDAStream s) : copy_stream(s) {}
};
#else
struct Trainer::CudaState {};
#endif

#if defined(WORKLOAD_TORCH_CUDA)
struct Trainer::Graph {
#if defined(WORKLOAD_GRAPH_MEMSET_REWRITE)
  at::cuda::CUDAGraph graph{/*keep_graph=*/true};  // readable between capture_end and instantiate
#else
  at::cuda::CUDAGraph graph;
#endif
  torch::Tensor images, labels;  // the static inputs every replay reads
  torch::Tensor loss;            // the static output each replay writes
};
#else
struct Trainer::Graph {};
#endif

#if defined(WORKLOAD_HAVE_NVJPEG)
struct Trainer::GpuInput {
  std::unique_ptr<dp::gpu::GpuDecoder> decoder;
  dp::gpu::DeviceBatch held;  // the step's batch, released once the step's work is queued
};
#else
struct Trainer::GpuInput {};
#endif

Trainer::Trainer(TrainConfig config, std::optional<DistEnv> dist) : config_(std::move(config)) {
  validate(config_);
  if (dist && config_.cuda_graph) {
    // DDP's reducer launches its all-reduces from autograd hooks as buckets fill, and reads the
    // buckets' state on the host between steps: not a fixed sequence to replay.
    throw UsageError(
        "--cuda-graph: not supported in a distributed run (torchrun); drop one of the two");
  }
  // A rank of a distributed run uses GPU LOCAL_RANK (of those CUDA_VISIBLE_DEVICES shows).
  const int gpu = dist ? dist->local_rank : 0;
  if (config_.device == Device::kCuda) device_ = torch::Device(torch::kCUDA, gpu);
  nvtx::set_enabled(config_.nvtx);  // before the loader's threads start: they obey it too
  at::set_num_threads(config_.intra_op_threads);
  torch::manual_seed(config_.loader.seed);

  if (!config_.synthetic) {
    index_ = std::make_shared<const dp::Food101Index>(
        dp::Food101Index::load(config_.data, to_string(config_.split)));
    num_classes_ = index_->num_classes();
  }

#if defined(WORKLOAD_TORCH_CUDA)
  if (device_.is_cuda()) {
    // Before anything else touches CUDA, and before profiler calls.
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(gpu));
    at::globalContext().setBenchmarkCuDNN(config_.cudnn_benchmark);
    cuda_ = std::make_unique<CudaState>(c10::cuda::getStreamFromPool(/*isHighPriority=*/true));
    if (config_.loader.decode == dp::DecodeDevice::kGpu || config_.cuda_graph) {
      cuda_->compute.emplace(c10::cuda::getStreamFromPool(/*isHighPriority=*/true));
    }
  }
#endif

  if (dist) {
    // The rendezvous, once the device is set (NCCL binds to it) and before the dataset's shard
    // and the model's broadcast need it.
    dist_ = std::make_unique<Distributed>(*dist, config_.dist_backend, device_,
                                          std::chrono::seconds(config_.dist_timeout_s));
  }

  model_ = ResNet50(num_classes_);
  model_->to(device_);
  const bool nchw = config_.loader.transform.layout == dp::ImageLayout::kNchw;
  if (!nchw) to_channels_last(*model_);
  if (dist_) {
    // After the device and the memory format (the buckets' views follow the gradients' layout).
    ddp_ = std::make_unique<DataParallel>(*dist_, *model_,
                                          static_cast<std::int64_t>(config_.bucket_mb) << 20,
                                          config_.broadcast_buffers);
  }
  if (config_.mode == RunMode::kForward && config_.forward_bn == ForwardBn::kEval) {
    model_->eval();
  } else {
    model_->train();
  }
  {
    // (x / 255 - mean) / std as x * scale + bias, applied on the device for uint8 batches.
    std::vector<float> scale(3), bias(3);
    for (int c = 0; c < 3; ++c) {
      scale[c] = 1.0f / (255.0f * dp::kImageNetStd[c]);
      bias[c] = -dp::kImageNetMean[c] / dp::kImageNetStd[c];
    }
    norm_scale_ = torch::tensor(scale).view({1, 3, 1, 1}).to(device_);
    norm_bias_ = torch::tensor(bias).view({1, 3, 1, 1}).to(device_);
  }
  optimizer_ = std::make_unique<ForeachSgd>(model_->parameters(), config_.lr, config_.momentum,
                                            config_.weight_decay);

  const dp::LoaderOptions& lo = config_.loader;
  if (config_.synthetic) {
    const auto s = lo.transform.image_size;
    torch::manual_seed(lo.seed + 1);
    torch::Tensor host =
        lo.transform.dtype == dp::HostDType::kUInt8
            ? torch::randint(256, {lo.batch_size, s, s, 3}, torch::kUInt8).permute({0, 3, 1, 2})
            : torch::randn({lo.batch_size, s, s, 3}).permute({0, 3, 1, 2});
    if (nchw) host = host.contiguous();  // the same values, NCHW in memory
    torch::Tensor labels = torch::randint(num_classes_, {lo.batch_size}, torch::kInt64);
    synthetic_digest_ = dp::hash64(labels.data_ptr(), labels.numel() * 8,
                                   static_cast<std::uint64_t>(labels.numel()));
    synthetic_digest_ =
        dp::hash64(host.data_ptr(), host.numel() * host.element_size(), synthetic_digest_);
    synthetic_images_ = host.to(device_);  // keeps the strides: channels_last or NCHW
    synthetic_labels_ = labels.to(device_);
  } else {
    dp::LoaderOptions options = lo;
    options.pin_memory = lo.pin_memory && device_.is_cuda();  // pinning serves device copies only
    if (dist_) {
      options.shard_count = dist_->world_size();  // DistributedSampler's shards
      options.shard_index = dist_->rank();
    }
    if (lo.decode == dp::DecodeDevice::kGpu) {
#if defined(WORKLOAD_HAVE_NVJPEG)
      dp::gpu::GpuDecodeOptions gpu_options;
      gpu_options.device = device_.index();
      gpu_input_ = std::make_unique<GpuInput>();
      gpu_input_->decoder = std::make_unique<dp::gpu::GpuDecoder>(index_, options, gpu_options);
      const dp::gpu::GpuDecodeInfo& info = gpu_input_->decoder->info();
      if (!info.notice.empty()) notices_.push_back(info.notice);
      if (!lo.pin_memory) {
        notices_.push_back(
            "--pin-memory=false: ignored with --decode gpu (the stage's transfers read the ring, "
            "which is page-locked)");
      }
      if (info.hardware) {
        notices_.push_back("GPU decode: nvJPEG " + info.nvjpeg_version + ", " +
                           std::to_string(info.engines) + " hardware JPEG engines");
      }
#endif
    } else {
      loader_ = std::make_unique<dp::Loader>(index_, options);
    }
    if (lo.pin_memory && !loader()->pinned()) {
      notices_.push_back("pinned memory unavailable (" +
                         std::string(device_.is_cuda() ? "cudaHostAlloc failed" : "CPU device") +
                         "): batches are in pageable memory");
    }
  }
#if !defined(WORKLOAD_GRAPH_MEMSET_REWRITE)
  if (config_.cuda_graph && config_.cuda_graph_memsets == GraphMemsets::kKernels) {
    notices_.push_back(
        "--cuda-graph-memsets kernels: this build cannot rewrite a graph before instantiating it "
        "(it needs a CUDA compiler and LibTorch 2.8 or later): memset nodes are replayed as "
        "captured");
  }
#endif
  if (!device_.is_cuda()) {
    notices_.push_back(std::string("CPU run: cudaProfilerStart/Stop skipped") +
                       (config_.nvtx ? " (the NVTX ranges are still emitted)" : ""));
  }
}

Trainer::~Trainer() {
  // Stop the workers before the model and streams go: a worker may be waiting on a fence that
  // references a CUDA event.
  if (loader_) loader_->stop();
#if defined(WORKLOAD_HAVE_NVJPEG)
  if (gpu_input_) {
    gpu_input_->held.release();
    gpu_input_->decoder->stop();
  }
#endif
}

const dp::Loader* Trainer::loader() const {
#if defined(WORKLOAD_HAVE_NVJPEG)
  if (gpu_input_) return &gpu_input_->decoder->loader();
#endif
  return loader_.get();
}

nlohmann::ordered_json Trainer::gpu_decode_report() const {
  nlohmann::ordered_json j;  // null
#if defined(WORKLOAD_HAVE_NVJPEG)
  if (!gpu_input_) return j;
  const dp::gpu::GpuDecodeInfo& info = gpu_input_->decoder->info();
  const dp::gpu::GpuDecodeStats st = gpu_input_->decoder->stats();
  j["hardware"] = info.hardware;
  j["engines"] = info.engines;
  j["cores_per_engine"] = info.cores_per_engine;
  j["nvjpeg_version"] = info.nvjpeg_version;
  j["notice"] = info.notice;
  j["batches"] = st.batches;
  j["hardware_images"] = st.hardware_images;
  j["fallback_images"] = st.fallback_images;
  j["refused_images"] = st.refused_images;
  j["failed_batches"] = st.failed_batches;
  j["fallback_reasons"] = st.fallback_reasons;
  j["consumer_wait_ms"] = std::chrono::duration<double, std::milli>(st.consumer_wait).count();
#endif
  return j;
}

std::int64_t Trainer::parameters() const { return count_parameters(*model_); }

void Trainer::zero_grad() {
  // optimizer.zero_grad(set_to_none=True), written out: LibTorch 1.13's zero_grad() zeroes.
  for (auto& p : model_->parameters()) p.mutable_grad().reset();
}

void Trainer::submit(dp::Batch& batch, torch::Tensor& images, torch::Tensor& labels) {
#if defined(WORKLOAD_HAVE_NVJPEG)
  if (gpu_input_) {
    // The stage wrote the batch on its own stream: the step's kernels wait for it, not the host.
    const dp::gpu::DeviceBatch& held = gpu_input_->held;
    WORKLOAD_CUDA_CHECK(
        cudaStreamWaitEvent(c10::cuda::getCurrentCUDAStream().stream(), held.ready(), 0));
    images = held.images();
    labels = held.labels();
    return;
  }
#endif
  if (config_.synthetic) {
    images = synthetic_images_;
    labels = synthetic_labels_;
    return;
  }
  if (!device_.is_cuda()) {
    // The model will read these until backward: copy them out of the ring, as .to(cuda) would.
    images = batch.images().clone();
    labels = batch.labels().clone();
    batch.release();
    return;
  }
#if defined(WORKLOAD_TORCH_CUDA)
  const auto compute = c10::cuda::getCurrentCUDAStream();
  auto done = std::make_shared<at::cuda::CUDAEvent>();
  const auto opts = torch::TensorOptions().device(device_);
  if (config_.copy_stream) {
    {
      c10::cuda::CUDAStreamGuard guard(cuda_->copy_stream);
      images = batch.images().to(opts, /*non_blocking=*/true);
      labels = batch.labels().to(opts, /*non_blocking=*/true);
      done->record(cuda_->copy_stream);
    }
    done->block(compute);  // the step's kernels wait for the copies, not the host
    // The copies' memory belongs to the copy stream's pool: keep it until compute is done too.
    images.record_stream(compute);
    labels.record_stream(compute);
  } else {
    images = batch.images().to(opts, /*non_blocking=*/true);
    labels = batch.labels().to(opts, /*non_blocking=*/true);
    done->record(compute);
  }
  // The slot is rewritten only after the copies that read it have finished.
  batch.release_after([done] { done->synchronize(); });
#endif
}

torch::Tensor Trainer::forward(const torch::Tensor& images) {
  if (config_.nvtx_detail != NvtxDetail::kLayers) return model_->forward(images);
  return model_->forward_with_hook(images, [](const char* name, bool enter) {
    if (enter) {
      nvtx::push(name);
    } else {
      nvtx::pop();
    }
  });
}

torch::Tensor Trainer::normalize(const torch::Tensor& images) const {
  // Converts on the device; the NHWC strides are kept (memory format preserved).
  return images.to(torch::kFloat32).mul_(norm_scale_).add_(norm_bias_);
}

void Trainer::compute(const torch::Tensor& images, const torch::Tensor& labels,
                      const std::function<void(const char*)>& stall) {
  const auto stall_in = [&](const char* phase) {
    if (stall) stall(phase);
  };
  const bool train = config_.mode == RunMode::kTrain;
  {
    Phase r(nvtx::kForward, &phase_);
    stall_in(nvtx::kForward);
    AutocastGuard autocast(config_.precision == Precision::kBf16);
    std::optional<torch::NoGradGuard> no_grad;
    if (!train) no_grad.emplace();
    // Under DDP the buffers' broadcast and the reducer's bookkeeping belong to forward, as in
    // PyTorch's DistributedDataParallel.forward.
    if (ddp_) ddp_->before_forward();
    const torch::Tensor output = forward(images);
    if (ddp_ && train) ddp_->before_backward();
    loss_ = torch::nn::functional::cross_entropy(output, labels);
  }
  if (!train) return;
  {
    Phase r(nvtx::kZeroGrad, &phase_);
    stall_in(nvtx::kZeroGrad);
    zero_grad();
  }
  {
    Phase r(nvtx::kBackward, &phase_);
    stall_in(nvtx::kBackward);
    loss_.backward();
  }
  {
    Phase r(nvtx::kOptimizerStep, &phase_);
    stall_in(nvtx::kOptimizerStep);
    optimizer_->step();
  }
}

void Trainer::capture_graph(RunResult& result) {
  const auto t = Clock::now();
#if defined(WORKLOAD_TORCH_CUDA)
  Phase range(nvtx::kGraphCapture, &phase_);
  graph_ = std::make_unique<Graph>();
  const dp::LoaderOptions& lo = config_.loader;
  if (config_.synthetic) {
    // The batch made once on the device is already static.
    graph_->images = synthetic_images_;
    graph_->labels = synthetic_labels_;
  } else {
    const auto s = lo.transform.image_size;
    const auto options = torch::TensorOptions().device(device_);
    graph_->images =
        torch::empty({lo.batch_size, 3, s, s},
                     options.dtype(lo.transform.dtype == dp::HostDType::kUInt8 ? torch::kUInt8
                                                                               : torch::kFloat32),
                     lo.transform.layout == dp::ImageLayout::kNchw
                         ? torch::MemoryFormat::Contiguous
                         : torch::MemoryFormat::ChannelsLast)
            .zero_();
    graph_->labels = torch::zeros({lo.batch_size}, options.dtype(torch::kInt64));
  }
  // The capture records work; it runs none. zero_grad() inside it drops the warm-up's gradients,
  // so backward allocates the gradients in the graph's memory pool, the same addresses every
  // replay, where optimizer_step reads them.
  device_synchronize();
  // The eager steps' cached blocks back to the device, so the graph's pool can take their memory
  // (as torch.cuda.graph empties the cache before capturing).
  c10::cuda::CUDACachingAllocator::emptyCache();
  const torch::Tensor eager_loss = loss_;
  std::optional<AutocastCacheOff> no_cast_cache;
  if (config_.precision == Precision::kBf16) no_cast_cache.emplace();
#if TORCH_VERSION_MAJOR >= 2
  // Thread-local capture mode: the loader's threads and the GPU decode stage keep running, and
  // may make CUDA calls a global-mode capture would forbid them (other streams, not this one).
  graph_->graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
#else
  graph_->graph.capture_begin();  // 1.x: global mode only
#endif
  try {
    torch::Tensor images = graph_->images;
    if (lo.transform.dtype == dp::HostDType::kUInt8) {
      Phase r(nvtx::kNormalize, &phase_);
      images = normalize(images);
    }
    compute(images, graph_->labels, nullptr);
  } catch (...) {
    // End the capture (invalidated or not) so the stream is usable for the error's clean-up.
    try {
      graph_->graph.capture_end();
    } catch (...) {
    }
    throw;
  }
  graph_->graph.capture_end();
#if defined(WORKLOAD_GRAPH_MEMSET_REWRITE)
  // A limit of 0 rewrites nothing and counts the memset nodes.
  const MemsetRewrite rewrite = rewrite_memsets(
      graph_->graph.raw_cuda_graph(),
      config_.cuda_graph_memsets == GraphMemsets::kKernels ? kMaxRewrittenMemsetBytes : 0);
  graph_->graph.instantiate();
  // Otherwise the first replay would upload the graph inside the capture window (on the H200 under
  // nsys, moving the upload here shortened the window's first, host-bound gap from 3.4 to 2.2 ms).
  WORKLOAD_CUDA_CHECK(cudaGraphUpload(graph_->graph.raw_cuda_graph_exec(),
                                      c10::cuda::getCurrentCUDAStream().stream()));
  device_synchronize();
  result.graph_memset_kernels = rewrite.kernels;
  result.graph_memset_nodes = rewrite.kept;
#endif
  // loss_ stays the last step run's (the warm-up's) until a replay writes the graph's.
  graph_->loss = std::exchange(loss_, eager_loss);
#endif
  result.graph_capture_ms = ms_since(t);
}

void Trainer::feed_graph(const torch::Tensor& images, const torch::Tensor& labels) {
#if defined(WORKLOAD_TORCH_CUDA)
  if (images.is_same(graph_->images)) return;  // --synthetic: the graph reads the batch itself
  if (images.sizes() != graph_->images.sizes() || labels.sizes() != graph_->labels.sizes()) {
    std::ostringstream what;
    what << "--cuda-graph: a batch of images " << images.sizes() << " and labels " << labels.sizes()
         << " does not fit the graph, captured for " << graph_->images.sizes() << " and "
         << graph_->labels.sizes();
    throw std::runtime_error(what.str());
  }
  graph_->images.copy_(images, /*non_blocking=*/true);
  graph_->labels.copy_(labels, /*non_blocking=*/true);
#else
  (void)images;
  (void)labels;
#endif
}

StepRecord Trainer::step(int index, bool warmup) {
  StepRecord rec;
  rec.index = index;
  rec.warmup = warmup;
  // --inject-stall, at the start of the phase range just opened: drain the device first (the host
  // may run steps ahead of it), then sleep, so the device idles for the sleep's length.
  auto stall = [&](const char* phase) {
    if (warmup) return;
    for (const InjectedStall& s : config_.inject_stall) {
      if (s.step != index || s.phase != phase) continue;
      nvtx::StallRange range(nvtx::kInjectStall);
      device_synchronize();
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(s.ms));
      rec.injected_stalls.push_back(s);
    }
  };
  const auto t_step = Clock::now();
  {
    Phase step_range(nvtx::kTorchStep, &phase_);
    torch::Tensor images, labels;
    {
      Phase data_range(nvtx::kDataLoad, &phase_);
      stall(nvtx::kDataLoad);
      dp::Batch batch;
      const auto t_wait = Clock::now();
      {
        Phase r(nvtx::kBatchWait, &phase_);
        stall(nvtx::kBatchWait);
        if (loader_) batch = loader_->next();
#if defined(WORKLOAD_HAVE_NVJPEG)
        if (gpu_input_) gpu_input_->held = gpu_input_->decoder->next();
#endif
      }
      rec.batch_wait_ms = ms_since(t_wait);
      const auto t_submit = Clock::now();
      {
        Phase r(nvtx::kH2dSubmit, &phase_);
        stall(nvtx::kH2dSubmit);
        if (batch.valid()) {
          rec.digest = batch.digest();
          rec.epoch = batch.epoch();
          rec.batch_in_epoch = batch.index_in_epoch();
          rec.skipped = batch.skipped();
#if defined(WORKLOAD_HAVE_NVJPEG)
        } else if (gpu_input_) {
          const dp::gpu::DeviceBatch& held = gpu_input_->held;
          rec.digest = held.digest();
          rec.epoch = held.epoch();
          rec.batch_in_epoch = held.index_in_epoch();
          rec.skipped = held.skipped();
#endif
        } else {
          rec.digest = synthetic_digest_;
        }
        submit(batch, images, labels);
        if (graph_) feed_graph(images, labels);
      }
      rec.h2d_submit_ms = ms_since(t_submit);
      if (!graph_ && config_.loader.transform.dtype == dp::HostDType::kUInt8) {
        Phase r(nvtx::kNormalize, &phase_);
        stall(nvtx::kNormalize);
        images = normalize(images);
      }
    }
    if (graph_) {
#if defined(WORKLOAD_TORCH_CUDA)
      Phase r(nvtx::kGraphReplay, &phase_);
      stall(nvtx::kGraphReplay);
      graph_->graph.replay();
      loss_ = graph_->loss;
#endif
    } else {
      compute(images, labels, stall);
    }
#if defined(WORKLOAD_HAVE_NVJPEG)
    if (gpu_input_) {
      // Every kernel that reads the batch is queued now: the stage may rewrite its buffer once
      // they have run.
      auto done = std::make_shared<at::cuda::CUDAEvent>();
      done->record(c10::cuda::getCurrentCUDAStream());
      gpu_input_->held.release_after([done] { done->synchronize(); });
    }
#endif
    if (config_.sync_every_step) {
      // The implicit-synchronization pitfall, on purpose: .item() waits for the device.
      Phase r(nvtx::kLossItem, &phase_);
      stall(nvtx::kLossItem);
      rec.loss = loss_.item<float>();
    }
  }
  rec.step_ms = ms_since(t_step);
  return rec;
}

void Trainer::request_stop(int signal) {
  int expected = -1;
  stop_requested_.compare_exchange_strong(expected, signal);
  // A single process stops at once: a step blocked in batch_wait returns. Ranks must not: a step
  // cut short on one rank would leave the others' all-reduces without a partner; they stop
  // together at a boundary they agree on (run()).
  if (loader_ && !dist_) loader_->cancel();
#if defined(WORKLOAD_HAVE_NVJPEG)
  if (gpu_input_ && !dist_) gpu_input_->decoder->cancel();
#endif
}

int Trainer::stop_signal() const {
  if (stop_requested_.load() >= 0) return stop_requested_.load();
  if (!dist_) return -1;
  // Another rank's request: "rank 1: SIGTERM".
  const std::string reason = dist_->stop_reason();
  if (reason.empty()) return -1;
  return signal_number(reason.substr(reason.find(": ") + 2));
}

bool Trainer::stop_at_boundary() {
  if (!dist_) return stop_requested_.load() >= 0;
  if (stop_requested_.load() >= 0 && !stop_proposed_) {
    stop_proposed_ = true;
    dist_->propose_stop(next_step_, signal_name(stop_requested_.load()));
  }
  nvtx::DdpRange range(nvtx::kStopAgreement);
  const std::optional<std::int64_t> stop = dist_->agreed_stop();
  if (stop && next_step_ > *stop) {
    // Ranks drifted further apart than the margin allows: the others will not run this rank's
    // last steps' collectives. Say so rather than wait for them.
    throw std::runtime_error("the ranks agreed to stop before step " + std::to_string(*stop) +
                             " (" + dist_->stop_reason() + "), but this rank had already run " +
                             std::to_string(next_step_) + " steps");
  }
  return stop && next_step_ >= *stop;
}

RunResult Trainer::run(const Progress& progress) {
  RunResult result;
  // At a step boundary: stop here? (Distributed: the ranks' agreement, see stop_at_boundary.)
  auto stopping = [&] { return stop_at_boundary(); };
  // One step, with failures put in context. Returns false when the step was cut short by a stop
  // request (the loader was cancelled while the step waited for its batch).
  auto guarded_step = [&](int i, bool warmup, std::vector<StepRecord>& into) {
    const std::string where =
        std::string(warmup ? "warm-up" : "captured") + " step " + std::to_string(i);
    try {
      into.push_back(step(i, warmup));
      ++next_step_;
    } catch (const dp::Cancelled&) {
      return false;
    } catch (const dp::DataError&) {
      throw;  // already names the file
    } catch (const c10::Error& e) {
      throw std::runtime_error(std::string(phase_) + " of " + where + ": " +
                               e.what_without_backtrace());
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string(phase_) + " of " + where + ": " + e.what());
    }
    if (progress) progress(into.back());
    return true;
  };
  for (int i = 0; i < config_.warmup && !stopping(); ++i) {
    if (!guarded_step(i, true, result.warmup_steps)) break;
  }
  device_synchronize();
  if (config_.cuda_graph && !stopping()) {
    const std::string failed = std::string("--cuda-graph: capturing the step failed in ");
    try {
      capture_graph(result);
    } catch (const c10::Error& e) {
      throw std::runtime_error(failed + phase_ + ": " + e.what_without_backtrace());
    } catch (const std::exception& e) {
      throw std::runtime_error(failed + phase_ + ": " + e.what());
    }
  }
  if (dist_ && !stopping()) {
    // Every rank's capture window covers the same steps.
    nvtx::DdpRange range(nvtx::kCaptureBarrier);
    dist_->barrier();
  }

  ProfilerCapture capture(device_.is_cuda());
  std::unique_ptr<TorchTrace> trace;
  if (!config_.torch_profiler_trace.empty()) {
    trace = std::make_unique<TorchTrace>(config_.torch_profiler_trace, device_.is_cuda());
  }
  if (!stopping()) {
    capture.start();
    result.capture_started = capture.started();
    if (trace) trace->start();
    const auto t_window = Clock::now();
    {
      Phase window(nvtx::kCaptureWindow);
      if (!config_.reuse_iterator) {
        const auto t = Clock::now();
        Phase r(nvtx::kIteratorReset);
        if (loader_) loader_->reset();
#if defined(WORKLOAD_HAVE_NVJPEG)
        if (gpu_input_) gpu_input_->decoder->reset();
#endif
        result.iterator_reset_ms = ms_since(t);
      }
      for (int i = 0; i < config_.steps && !stopping(); ++i) {
        if (!guarded_step(i, false, result.steps)) break;
      }
      const auto t = Clock::now();
      Phase r(nvtx::kCaptureDrain);
      device_synchronize();
      result.capture_drain_ms = ms_since(t);
    }
    result.elapsed_s = ms_since(t_window) / 1000.0;
    if (trace) {
      trace->stop_and_save();
      result.torch_trace = trace->path();
    }
    const auto t_stop = Clock::now();
    capture.stop();
    result.profiler_stop_ms = capture.started() ? ms_since(t_stop) : 0.0;
    if (result.elapsed_s > 0) {
      result.images_per_s = static_cast<double>(result.steps.size()) *
                            static_cast<double>(config_.loader.batch_size) / result.elapsed_s;
    }
  }
  // Read on the host only now, after the drain: inside the window this would synchronize.
  if (loss_.defined()) result.loss_after_drain = loss_.item<float>();
  if (dist_) {
    device_synchronize();  // the drain's, when the run stopped before the capture
    result.parameter_digest = parameter_digest(*model_);
  }
  result.interrupted = stop_signal() >= 0;
  if (result.interrupted) result.interrupt_signal = signal_name(stop_signal());
  if (dist_) result.stop_agreed_by = dist_->stop_reason();
  return result;
}

}  // namespace workload
