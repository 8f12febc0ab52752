// Every setting of a training run, as parsed from train_resnet50's flags.
#pragma once

#include <cstdint>
#include <string>

#include "data_pipeline/loader.h"

namespace workload {

/// The effective configuration of one run. Defaults are the article's settings.
struct TrainConfig {
  std::string data;  ///< Food-101 root; empty only with synthetic.
  std::string split = "train";
  std::int64_t batch_size = 128;
  int warmup = 3;
  int steps = 8;
  int workers = 8;  ///< Set to min(8, hardware threads) by the parser's default.
  int prefetch_factor = 2;
  bool pin_memory = true;
  data_pipeline::WorkUnit work_unit = data_pipeline::WorkUnit::kBatch;
  bool reuse_iterator = true;
  std::uint64_t seed = 2026;
  std::string device = "cuda";  ///< "cuda" or "cpu".
  int image_size = 224;
  bool cudnn_benchmark = false;
  int intra_op_threads = 1;
  double lr = 0.1;
  double momentum = 0.9;
  double weight_decay = 1e-4;
  bool synthetic = false;   ///< Random batches made once on the device; no loader.
  std::string report;       ///< JSON report path; empty for none.
  bool copy_stream = true;  ///< H2D copies on a side stream (false: the compute stream).
  bool nvtx = true;         ///< Emit the NVTX ranges (false measures their cost).
  data_pipeline::BadImagePolicy on_bad_image = data_pipeline::BadImagePolicy::kError;
  bool quiet = false;  ///< No per-step progress lines.

  // Experiments beyond the article; the defaults keep its behaviour.
  std::string precision = "fp32";  ///< "fp32" or "bf16" (CUDA autocast for forward + loss).
  data_pipeline::HostDType host_dtype =
      data_pipeline::HostDType::kFloat32;  ///< uint8: the device
                                           ///< converts and normalises, inside a `normalize` range.
  std::string nvtx_detail = "steps";       ///< "layers": ranges per stage and block inside forward.
  std::string torch_profiler_trace;  ///< Chrome trace of the capture window (LibTorch profiler).
  std::string mode = "train";        ///< "forward": no grad, no backward/zero_grad/optimizer.
  std::string forward_bn = "eval";   ///< BatchNorm in forward mode: "eval" or "train" statistics.
  bool sync_every_step = false;      ///< Read the loss on the host every step (implicit sync).
};

}  // namespace workload
