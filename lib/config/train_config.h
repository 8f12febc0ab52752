// Every setting of a training run as typed values, the name tables of its choices, and the one
// place they are validated. Light: no LibTorch, OpenCV or cxxopts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/named_enum.h"
#include "data_pipeline/food101_index.h"
#include "data_pipeline/loader_options.h"
#include "lib/core/usage_error.h"

namespace workload {

using common::enum_choices;
using common::EnumName;
using common::parse_enum;
using common::to_string;

/// Where the model runs.
enum class Device { kCuda, kCpu };
inline constexpr EnumName<Device> kDeviceNames[] = {{Device::kCuda, "cuda"}, {Device::kCpu, "cpu"}};
constexpr const auto& enum_names(Device) { return kDeviceNames; }

/// Arithmetic of forward and loss.
enum class Precision {
  kFp32,  ///< float32 (TF32 convolutions on Ampere and later, PyTorch's default).
  kBf16,  ///< CUDA autocast to bfloat16.
  kFp16,  ///< CUDA autocast to float16, the loss scaled dynamically (lib/model/loss_scaler.h).
};
inline constexpr EnumName<Precision> kPrecisionNames[] = {
    {Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}, {Precision::kFp16, "fp16"}};
constexpr const auto& enum_names(Precision) { return kPrecisionNames; }

/// --precision bf16 or fp16: how autocast's low-precision copies of the weights are made each
/// forward.
enum class WeightCast {
  kAuto,      ///< kTogether in a single process, kPerLayer under torchrun (resolve_weight_cast).
  kTogether,  ///< All at the start of forward in one multi-tensor kernel, the gradients cast back
              ///< in one at the end of backward (lib/model/weight_cast.h).
  kPerLayer,  ///< Autocast's own: each where its layer uses it, a kernel each way per weight, each
              ///< gradient ready for DDP's bucket as soon as its layer's backward is.
};
inline constexpr EnumName<WeightCast> kWeightCastNames[] = {{WeightCast::kAuto, "auto"},
                                                            {WeightCast::kTogether, "together"},
                                                            {WeightCast::kPerLayer, "per-layer"}};
constexpr const auto& enum_names(WeightCast) { return kWeightCastNames; }

/// What a step does.
enum class RunMode {
  kTrain,    ///< forward, zero_grad, backward, optimizer_step.
  kForward,  ///< forward only, without autograd: the inference baseline.
};
inline constexpr EnumName<RunMode> kRunModeNames[] = {{RunMode::kTrain, "train"},
                                                      {RunMode::kForward, "forward"}};
constexpr const auto& enum_names(RunMode) { return kRunModeNames; }

/// NVTX ranges beyond the step tree.
enum class NvtxDetail {
  kSteps,   ///< The step tree only.
  kLayers,  ///< Also a range per stage and per block inside forward.
};
inline constexpr EnumName<NvtxDetail> kNvtxDetailNames[] = {{NvtxDetail::kSteps, "steps"},
                                                            {NvtxDetail::kLayers, "layers"}};
constexpr const auto& enum_names(NvtxDetail) { return kNvtxDetailNames; }

/// BatchNorm statistics in RunMode::kForward.
enum class ForwardBn {
  kEval,   ///< Running statistics (model.eval()).
  kTrain,  ///< Batch statistics, updating the running ones (model.train()).
};
inline constexpr EnumName<ForwardBn> kForwardBnNames[] = {{ForwardBn::kEval, "eval"},
                                                          {ForwardBn::kTrain, "train"}};
constexpr const auto& enum_names(ForwardBn) { return kForwardBnNames; }

/// --cuda-graph: what becomes of the memset nodes the capture records (cuDNN zeroes small counters
/// before its BatchNorm and convolution kernels, some 200 a ResNet-50 training step).
enum class GraphMemsets {
  kKernels,  ///< Those of up to 64 KiB rewritten into kernel nodes
             ///< (lib/step/graph/memset_rewrite.h).
  kNodes,    ///< Replayed as captured.
};
inline constexpr EnumName<GraphMemsets> kGraphMemsetsNames[] = {{GraphMemsets::kKernels, "kernels"},
                                                                {GraphMemsets::kNodes, "nodes"}};
constexpr const auto& enum_names(GraphMemsets) { return kGraphMemsetsNames; }

/// The learning rate of each optimizer step (lib/model/lr_schedule.h: the formulas).
enum class LrScheduleKind {
  kConstant,  ///< The peak every step (after the warm-up, if one is asked for): the article's.
  kCosine,    ///< Linear warm-up, then a cosine from the peak down to a floor.
  kStep,      ///< Linear warm-up, then the peak divided by 10 at fixed shares of the run.
};
inline constexpr EnumName<LrScheduleKind> kLrScheduleKindNames[] = {
    {LrScheduleKind::kConstant, "constant"},
    {LrScheduleKind::kCosine, "cosine"},
    {LrScheduleKind::kStep, "step"}};
constexpr const auto& enum_names(LrScheduleKind) { return kLrScheduleKindNames; }

/// The collective backends of c10d a data-parallel run can use (lib/distributed/).
enum class DistBackend {
  kNccl,  ///< GPUs (ProcessGroupNCCL).
  kGloo,  ///< CPUs (ProcessGroupGloo).
};
inline constexpr EnumName<DistBackend> kDistBackendNames[] = {{DistBackend::kNccl, "nccl"},
                                                              {DistBackend::kGloo, "gloo"}};
constexpr const auto& enum_names(DistBackend) { return kDistBackendNames; }

/// A known host stall (--inject-stall PHASE@STEP:MS): the main thread sleeps `ms` inside the
/// `phase` range of captured step `step`, turning the workload into a known-answer test for
/// profiling tools.
struct InjectedStall {
  std::string phase;  ///< One of the step's ranges (lib/instrument/nvtx.h), e.g. "forward".
  int step = 0;       ///< 0-based captured step.
  double ms = 0;      ///< Milliseconds, > 0.
  friend bool operator==(const InjectedStall& a, const InjectedStall& b) {
    return a.phase == b.phase && a.step == b.step && a.ms == b.ms;
  }
};
/// Parses "forward@3:50" (PHASE@STEP:MS; STEP an integer >= 0, MS a number > 0 and at most
/// kMaxInjectedStallMs). Whether PHASE and STEP exist in a run's step is check_stalls()'s business
/// (lib/run/stall_injector.h).
/// \throws std::invalid_argument saying what is wrong.
InjectedStall parse_list_item(const std::string& text, InjectedStall* /*tag*/);
/// "forward@3:50".
std::string to_string(const InjectedStall& stall);
inline constexpr double kMaxInjectedStallMs = 60000;

/// The smallest crop ResNet-50's five stride-2 stages accept (32 / 2^5 = 1 pixel at the end).
inline constexpr int kMinTrainImageSize = 32;

/// The effective configuration of one run. Defaults are the article's settings but for the learning
/// rate (a scaled peak, warm-up and cosine decay, so that the default run learns; the article's
/// constant 0.1 is `lr_schedule = kConstant, lr = 0.1`); the command line (lib/run/train_cli.cpp)
/// declares, parses and reports every field from one table.
struct TrainConfig {
  std::string data;  ///< Food-101 root; empty only with synthetic.
  data_pipeline::Split split = data_pipeline::Split::kTrain;
  /// Batch size, workers, prefetch, pinning, work unit, seed (which also seeds the model), crop
  /// size, host dtype and bad-image policy.
  data_pipeline::LoaderOptions loader;
  int warmup = 3;
  int steps = 8;
  bool reuse_iterator = true;
  Device device = Device::kCuda;
  bool cudnn_benchmark = false;
  /// Two runs with the same flags and seed train to the same bits: LibTorch's cuDNN calls take
  /// deterministic algorithms only, and with fuse_conv_bn the batch norms' sums are added in a
  /// fixed order (lib/model/conv_bn_ops.h, SumOrder::kOrdered) instead of by the engines.
  bool deterministic = false;
  int intra_op_threads = 1;
  /// The peak learning rate; nullopt (--lr not given): the linear scaling rule's, 0.1 x global
  /// batch / 256 (lib/model/lr_schedule.h, plan_lr).
  std::optional<double> lr;
  LrScheduleKind lr_schedule = LrScheduleKind::kCosine;
  /// Optimizer steps of linear warm-up to the peak; nullopt: the schedule's rule
  /// (default_lr_warmup_steps, lib/model/lr_schedule.h).
  std::optional<int> lr_warmup_steps;
  double momentum = 0.9;
  double weight_decay = 1e-4;
  /// Cross-entropy's label smoothing, in [0, 1].
  double label_smoothing = 0;
  /// Eager steps read a schedule's LR from a table on the device, as --cuda-graph's replays do:
  /// an eager run then gives a graph run's numbers bit for bit (lib/model/foreach_sgd.h). false:
  /// the LR is the scalar of the article's kernels. A constant schedule is the scalar either way.
  bool lr_on_device = false;
  /// > 0: train this many passes over the split (each rank its shard) instead of --warmup +
  /// --steps, with an evaluation and a checkpoint at epoch ends (Trainer: the run's shape).
  int epochs = 0;
  /// --epochs: evaluate after every this many epochs and after the last (0: never).
  int eval_every = 1;
  /// --epochs: the evaluation's batch; nullopt: --batch-size.
  std::optional<std::int64_t> eval_batch_size;
  /// --epochs: the split the evaluation reads (resize + centre crop, in order, every image once).
  data_pipeline::Split eval_split = data_pipeline::Split::kTest;
  /// --epochs: write a checkpoint here at every epoch end (lib/run/checkpoint.h); empty: none.
  std::string checkpoint_dir;
  /// --epochs: continue from the newest checkpoint in checkpoint_dir (none there: from the start).
  bool resume = false;
  /// --epochs: delete checkpoint_dir's checkpoints and train from the first epoch (without it, or
  /// resume, a directory that holds checkpoints is refused).
  bool start_over = false;
  /// Go on after a loss that is not finite (NaN, inf) instead of stopping with exit status 1; a
  /// --target-top1 is then never reached.
  bool allow_nonfinite_loss = false;
  /// --epochs: cudaProfilerStart before this 0-based step of the run and Stop after --steps steps
  /// (whatever lies between them, an evaluation or a checkpoint, is in the window); nullopt: no
  /// capture window.
  std::optional<std::int64_t> capture_at;
  /// --epochs: stop once an evaluation's top-1 (a fraction) reaches this, recording the time.
  std::optional<double> target_top1;
  bool synthetic = false;   ///< Random batches made once on the device; no loader.
  std::string report;       ///< JSON report path; empty for none.
  bool copy_stream = true;  ///< H2D copies on a side stream (false: the step's stream).
  bool nvtx = true;         ///< Emit NVTX ranges and thread names (false measures their cost). The
                            ///< switch is process-wide: the Trainer sets it when it is constructed.
  bool quiet = false;       ///< No per-step progress lines.

  // Experiments beyond the article; the defaults keep its behaviour.
  Precision precision = Precision::kFp32;
  WeightCast weight_cast = WeightCast::kAuto;  ///< Only meaningful with bf16 or fp16.
  NvtxDetail nvtx_detail = NvtxDetail::kSteps;
  std::string torch_profiler_trace;  ///< Chrome trace of the capture window (LibTorch profiler).
  RunMode mode = RunMode::kTrain;
  ForwardBn forward_bn = ForwardBn::kEval;  ///< Only meaningful with RunMode::kForward.
  bool sync_every_step = false;             ///< Read the loss on the host every step.
  std::vector<InjectedStall> inject_stall;  ///< Known host stalls in the captured steps.
  /// Capture the step's device work (normalize, forward, loss, backward, optimizer step) into a
  /// CUDA graph once after the warm-up, and replay it every captured step.
  bool cuda_graph = false;
  /// With cuda_graph: rewrite the graph's small memset nodes into kernel nodes before instantiating
  /// it (where this build can), or replay it as captured.
  GraphMemsets cuda_graph_memsets = GraphMemsets::kKernels;
  /// Every BatchNorm on cuDNN's NHWC kernels with what follows it fused: BN+ReLU and
  /// BN+add+ReLU in one forward and one backward kernel each (lib/model/norm_activation.h).
  bool fused_bn = false;
  /// Every bottleneck's convolutions carry the batch norms around them: each applies the previous
  /// BN and ReLU to its input and sums its output for the next (lib/model/fused_bottleneck.h), on
  /// cuDNN's fused engines at fp16 on a GPU, on LibTorch's kernels otherwise. Training only.
  bool fuse_conv_bn = false;
  /// The stem's 3-channel input padded to 4 with a zero channel, and its weight with a zero
  /// slice, as the MLPerf record's stem (ResNet50Impl::set_stem_pad): the same sums, other kernels.
  bool stem_pad = false;

  // Data parallelism, when a launcher (torchrun) put this process in a distributed run; ignored
  // by a single process. Every other setting then means what it means per rank.
  DistBackend dist_backend = DistBackend::kNccl;  ///< The parser's default follows --device.
  int dist_timeout_s = 300;  ///< Every collective and store wait, and the rendezvous.
  /// A peer rank whose heartbeat (one a second, from a thread of its own) has not moved for this
  /// long, or a store that has not answered for this long, is missing: the run stops (exit 3).
  int dist_peer_timeout_s = 5;
  int bucket_mb = 25;  ///< Gradient buckets after the first (1 MiB), as DDP's bucket_cap_mb.
  bool broadcast_buffers = true;  ///< Rank 0's BatchNorm buffers before each forward, as DDP.
  /// DDP's gradient_as_bucket_view: each gradient becomes a view of its bucket once copied in, so
  /// the all-reduced bucket is the gradient (no copy back). Off by default, as DDP.
  bool grad_bucket_view = false;
};

/// What kAuto means for a run: kTogether in a single process, kPerLayer in a distributed one (one
/// cast node would hold every gradient back until the end of backward, and DDP's all-reduces with
/// it). An explicit choice is kept.
WeightCast resolve_weight_cast(WeightCast asked, bool distributed);

/// Checks what the flags' own ranges cannot: combinations, the machine (a CUDA device for
/// Device::kCuda), the parts this build has (lib/core/build_features.h) and output paths
/// (check_output_file). What needs the step's plan (--inject-stall's phases) is checked above this
/// layer: validate_run() (lib/run/train_cli.h) calls both, for the parser and the Trainer alike.
/// \throws UsageError naming the flag.
void validate(const TrainConfig& config);

}  // namespace workload
