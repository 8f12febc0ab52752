// The flag tables: every flag of train_resnet50 (and the loader flags loader_bench shares), each
// bound to the field it sets. One line per flag; the visitors in lib/config/flag_table.h turn a
// table into the cxxopts declarations, the parser, the range check of validate() and the report's
// `config`.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "data_pipeline/loader_options.h"
#include "lib/config/flag_table.h"
#include "lib/config/train_config.h"

namespace workload {

// --help groups.
inline constexpr const char* kDataGroup = "Data";
inline constexpr const char* kRunGroup = "Run";
inline constexpr const char* kExperimentsGroup = "Experiments";
inline constexpr const char* kDistributedGroup = "Distributed (under torchrun)";
inline constexpr const char* kOutputGroup = "Output";

/// The loader's flags. `L` is data_pipeline::LoaderOptions, const or not.
template <typename L, typename V>
void visit_loader_flags(L& o, V&& v) {
  static_assert(std::is_same_v<std::remove_const_t<L>, data_pipeline::LoaderOptions>);
  v.integer({"batch-size", kDataGroup, "images per step"}, o.batch_size, 1, 1 << 16);
  v.integer({"workers", kDataGroup, "loader threads; 0 decodes on the main thread"}, o.workers, 0,
            1024);
  v.integer({"prefetch-factor", kDataGroup, "batches per worker decoded ahead"}, o.prefetch_factor,
            1, 1024);
  v.boolean({"pin-memory", kDataGroup, "page-locked batch ring (CUDA only)"}, o.pin_memory);
  v.choice({"work-unit", kDataGroup,
            "batch: a worker builds a whole batch; sample: workers share a batch"},
           o.work_unit);
  v.integer({"seed", kRunGroup, "seed for the model, the order and the augmentation"}, o.seed,
            std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max());
  v.integer({"image-size", kDataGroup, "crop size in pixels"}, o.transform.image_size,
            kMinTrainImageSize, 4096);
  v.choice({"on-bad-image", kDataGroup, "what an undecodable image does"}, o.on_bad_image);
  v.integer({"max-image-mb", kDataGroup,
             "image files larger than this (MiB) are refused unread, as bad images"},
            o.max_image_mb, std::int64_t{1}, data_pipeline::kMaxImageMbCeiling);
  v.choice({"decode", kExperimentsGroup,
            "gpu: JPEGs decoded by the GPU's hardware engines (nvJPEG), the CPU path taking "
            "what they cannot (CUDA builds with nvJPEG); sets CUDA_DEVICE_MAX_CONNECTIONS=32 "
            "unless the environment has it"},
           o.decode);
  v.choice({"host-dtype", kExperimentsGroup, "uint8 batches are normalised on the device"},
           o.transform.dtype);
}

/// Every flag of train_resnet50 but --help and --version. `C` is TrainConfig, const or not.
template <typename C, typename V>
// NOLINTNEXTLINE(readability-function-size): the table of the flags, a line or two each
void visit_train_flags(C& c, V&& v) {
  static_assert(std::is_same_v<std::remove_const_t<C>, TrainConfig>);
  v.text({"data", kDataGroup, "Food-101 root (holds food-101/, or is it)"}, c.data);
  v.choice({"split", kDataGroup, "the split to read"}, c.split);
  visit_loader_flags(c.loader, v);
  v.boolean({"reuse-iterator", kDataGroup, "keep the warm-up's loader traversal for the capture"},
            c.reuse_iterator);
  v.boolean({"synthetic", kDataGroup,
             "random batches made once on the device, no loader (GPU-bound ceiling)"},
            c.synthetic);
  v.integer({"warmup", kRunGroup, "steps before the capture (11 with --cuda-graph)"}, c.warmup, 0,
            1000000);
  v.integer({"steps", kRunGroup, "captured steps (with --epochs: the window's, from --capture-at)"},
            c.steps, 1, 1000000);
  v.integer({"epochs", kRunGroup,
             "train this many passes over the split (each rank its shard) instead of --warmup + "
             "--steps, evaluating and checkpointing at epoch ends, a line per epoch (0: off)"},
            c.epochs, 0, 100000);
  v.integer({"eval-every", kRunGroup,
             "with --epochs: evaluate after every N epochs and after the last (0: never)"},
            c.eval_every, 0, 100000);
  v.integer({"eval-batch-size", kRunGroup,
             "with --epochs: the evaluation's batch (default: "
             "--batch-size)"},
            c.eval_batch_size, std::int64_t{1}, std::int64_t{1} << 16);
  v.choice({"eval-split", kRunGroup,
            "with --epochs: the split evaluated (resized, centre-cropped, every image once)"},
           c.eval_split);
  v.text({"checkpoint-dir", kRunGroup,
          "with --epochs: write a checkpoint here at every epoch end (atomically; the previous "
          "one kept until the new one is complete)"},
         c.checkpoint_dir);
  v.boolean({"resume", kRunGroup,
             "with --checkpoint-dir: continue from its newest checkpoint (none: from the start)"},
            c.resume);
  v.boolean({"start-over", kRunGroup,
             "with --checkpoint-dir: delete the checkpoints it holds (another run's, or an earlier "
             "start of this one) and train from the first epoch; without it or --resume, a "
             "directory that holds checkpoints is refused"},
            c.start_over);
  v.boolean(
      {"allow-nonfinite-loss", kRunGroup,
       "go on when a loss is NaN or infinite (default: stop at the epoch's end, or the run's, "
       "naming the step, exit 1); --target-top1 is then never reached"},
      c.allow_nonfinite_loss);
  v.integer({"capture-at", kRunGroup,
             "with --epochs: the capture window opens before this 0-based step of the run and "
             "closes after --steps steps, the evaluation and checkpoint between them included "
             "(default: no window)"},
            c.capture_at, std::int64_t{0}, std::int64_t{1} << 40);
  v.real({"target-top1", kRunGroup,
          "with --epochs: stop after the evaluation whose top-1 (0..1) reaches this, recording "
          "the time to accuracy"},
         c.target_top1, 0.0, 1.0);
  v.choice({"device", kRunGroup, "where the model runs"}, c.device);
  v.boolean({"cudnn-benchmark", kRunGroup, "let cuDNN time its algorithms"}, c.cudnn_benchmark);
  v.boolean({"deterministic", kRunGroup,
             "two runs with the same flags and seed train to the same bits: cuDNN's deterministic "
             "algorithms only, and with --fuse-conv-bn the batch norms' sums added in a fixed "
             "order, not by the fused engines' blocks as they finish (slower)"},
            c.deterministic);
  v.integer({"intra-op-threads", kRunGroup, "LibTorch CPU threads (the article uses 1)"},
            c.intra_op_threads, 1, 1024);
  v.choice({"lr-schedule", kRunGroup,
            "the learning rate of each optimizer step: the peak --lr throughout (the article's), "
            "or a linear warm-up to it then a cosine to 0 or a decay by 10 at 1/3, 2/3 and 8/9 of "
            "the steps after it"},
           c.lr_schedule);
  v.real({"lr", kRunGroup,
          "peak SGD learning rate (default: 0.1 x global batch / 256, the global batch being "
          "--batch-size x the ranks; --lr-schedule constant --lr 0.1 is the article's)"},
         c.lr, 0.0, 1e6);
  v.integer({"lr-warmup-steps", kRunGroup,
             "optimizer steps of linear warm-up to the peak --lr, step k at peak x (k+1) / N "
             "(default: 25% of the run's optimizer steps, at least 1, with cosine and step; 0 with "
             "constant)"},
            c.lr_warmup_steps, 0, 1000000);
  v.real({"momentum", kRunGroup, "SGD momentum"}, c.momentum, 0.0, 1.0);
  v.real({"weight-decay", kRunGroup, "SGD weight decay"}, c.weight_decay, 0.0, 1e3);
  v.real({"label-smoothing", kRunGroup, "cross-entropy label smoothing (0: none, the article's)"},
         c.label_smoothing, 0.0, 1.0);
  v.boolean({"lr-on-device", kRunGroup,
             "eager steps read the schedule's LR from a table on the device, as --cuda-graph does: "
             "the graph run's numbers bit for bit, at a few more kernels a step (default: the "
             "LR is the scalar of the article's kernels)"},
            c.lr_on_device);
  v.boolean({"copy-stream", kRunGroup, "issue host-to-device copies on a side stream"},
            c.copy_stream);
  v.boolean({"nvtx", kRunGroup, "emit NVTX ranges and thread names (false measures their cost)"},
            c.nvtx);
  v.choice({"precision", kExperimentsGroup,
            "bf16 or fp16 autocasts forward and loss (CUDA); fp16 scales the loss dynamically, "
            "as torch.amp.GradScaler, skipping a step whose gradients are not finite"},
           c.precision);
  v.choice({"weight-cast", kExperimentsGroup,
            "with --precision bf16 or fp16: together casts every weight to that dtype at the start "
            "of forward "
            "and every gradient back at the end of backward, one kernel each; per-layer is "
            "autocast's own cast where each layer runs, a kernel each way per weight; auto: "
            "together, per-layer under torchrun (where DDP overlaps the gradients' all-reduce "
            "with backward)"},
           c.weight_cast);
  v.choice({"nvtx-detail", kExperimentsGroup, "layers adds ranges per stage and block in forward"},
           c.nvtx_detail);
  v.text({"torch-profiler-trace", kExperimentsGroup,
          "record the capture window with LibTorch's profiler (Kineto) into this Chrome trace "
          "JSON; not under nsys"},
         c.torch_profiler_trace);
  v.choice({"mode", kExperimentsGroup, "forward drops zero_grad, backward and optimizer_step"},
           c.mode);
  v.choice({"forward-bn", kExperimentsGroup, "BatchNorm statistics in --mode forward"},
           c.forward_bn);
  v.boolean({"sync-every-step", kExperimentsGroup,
             "read the loss on the host every step (an implicit sync per step)"},
            c.sync_every_step);
  v.choice({"memory-format", kExperimentsGroup,
            "the model's and the batches' layout (nchw shows what channels_last saves)"},
           c.loader.transform.layout);
  v.list({"inject-stall", kExperimentsGroup,
          "PHASE@STEP:MS: sleep MS ms on the host inside range PHASE of captured step STEP (a "
          "known answer for profiling tools)"},
         c.inject_stall);
  v.boolean({"cuda-graph", kExperimentsGroup,
             "after the warm-up, capture the step's device work in a CUDA graph and replay it "
             "each step (CUDA; not with --nvtx-detail layers or torchrun)"},
            c.cuda_graph);
  v.choice({"cuda-graph-memsets", kExperimentsGroup,
            "with --cuda-graph: kernels rewrites the graph's small memset nodes (cuDNN's) into "
            "kernel nodes, which start without a memset's pipeline bubble; nodes replays the graph "
            "as captured"},
           c.cuda_graph_memsets);
  v.boolean({"fused-bn", kExperimentsGroup,
             "every BatchNorm on cuDNN's NHWC kernels, fused with the ReLU and the residual add "
             "that follow it (CUDA builds with cuDNN; --memory-format channels_last)"},
            c.fused_bn);
  v.boolean({"fuse-conv-bn", kExperimentsGroup,
             "every bottleneck's convolutions apply the previous BatchNorm and ReLU to their input "
             "and sum their output for the next, one pass over the activations fewer a BatchNorm "
             "(cuDNN's fused engines with --precision fp16 on CUDA; LibTorch's kernels, slower, "
             "otherwise); training only"},
            c.fuse_conv_bn);
  v.boolean(
      {"stem-pad", kExperimentsGroup,
       "the first convolution's 3-channel input padded to 4 with a zero channel (and its "
       "weight with a zero slice), as the MLPerf record's stem: the same sums, other kernels, "
       "where cuDNN otherwise pads the input itself"},
      c.stem_pad);
  v.choice({"dist-backend", kDistributedGroup,
            "collectives between ranks (default: nccl with --device cuda, gloo with cpu)"},
           c.dist_backend);
  v.integer({"dist-timeout-s", kDistributedGroup,
             "seconds any collective, store wait or the rendezvous may take"},
            c.dist_timeout_s, 1, 86400);
  v.integer({"dist-peer-timeout-s", kDistributedGroup,
             "seconds without a peer's heartbeat (one a second) before it counts as dead or frozen "
             "and the run stops; a slow but live peer keeps beating"},
            c.dist_peer_timeout_s, 2, 3600);
  v.integer({"bucket-mb", kDistributedGroup, "gradient bucket size after the first 1 MB"},
            c.bucket_mb, 1, 4096);
  v.boolean({"broadcast-buffers", kDistributedGroup,
             "rank 0's BatchNorm buffers to every rank before each forward"},
            c.broadcast_buffers);
  v.boolean({"grad-bucket-view", kDistributedGroup,
             "gradients as views of DDP's buckets (gradient_as_bucket_view): no copy back after "
             "each all-reduce"},
            c.grad_bucket_view);
  v.text({"report", kOutputGroup,
          "write the JSON report here (in a distributed run each rank writes NAME.rank<r>.EXT)"},
         c.report);
  v.boolean({"quiet", kOutputGroup, "no per-step progress lines", /*reported=*/false}, c.quiet);
}

}  // namespace workload
