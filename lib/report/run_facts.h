// The plain record of one run that every report is written from: the configuration, the machine,
// the model, the input, the steps and the data-parallel membership, as values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "lib/config/train_config.h"
#include "lib/device/cuda_connections.h"
#include "lib/device/cuda_device.h"
#include "lib/distributed/launch_env.h"
#include "lib/input/input_source.h"
#include "lib/model/loss_scaler.h"
#include "lib/model/lr_schedule.h"
#include "lib/report/run_result.h"

namespace workload {

/// The machine and libraries a run ran on (collect_environment, lib/report/environment.h).
struct EnvironmentFacts {
  std::string libtorch;  ///< e.g. "2.11.0"
  /// The CUDA runtime, driver and cuDNN versions and the device (lib/device/cuda_device.h).
  DeviceDescription device;
  unsigned hardware_threads = 0;
  /// How many hardware work queues the process's streams share, and who set it: it decides which
  /// streams can wait behind each other's work, so runs are compared with it known.
  CudaConnections cuda_connections;
  std::optional<std::string> nccl_nvls_enable;  ///< NCCL_NVLS_ENABLE as found (nothing sets it)
  std::string opencv;
  int libjpeg = 0;
  std::optional<int> libjpeg_turbo;
};

/// The model as built.
struct ModelFacts {
  std::int64_t num_classes = 0;
  std::int64_t parameters = 0;
  bool on_cuda = false;  ///< where it runs
  /// --precision bf16 or fp16: how the weights' low-precision copies were made (--weight-cast
  /// resolved).
  std::optional<WeightCast> weight_cast;
};

/// The host loader behind the run's input (not for synthetic batches).
struct LoaderFacts {
  HostRingFacts ring;
  std::int64_t dataset_images = 0;
};

/// --precision fp16's loss scaling: its options and where it ended.
struct LossScalingFacts {
  LossScaler::Options options;
  LossScaler::State state;  ///< at the end of the run
};

/// A rank's membership of a data-parallel run.
struct DistFacts {
  LaunchEnv env;
  DistBackend backend = DistBackend::kNccl;
  std::string nccl_version;  ///< empty without NCCL
};

/// A report written without the trainer's thread (the distributed watchdog's last resort): only
/// what is known without it.
struct PartialFacts {
  std::string why;
  std::int64_t steps_completed = 0;
};

/// Everything a report says of a run. Built by the Trainer (Trainer::facts) for a run that came
/// back, and by its last resort from copies for one that did not (`partial` set, `result` holding
/// only the interruption); report_json() and format_summary() read nothing else.
struct RunFacts {
  TrainConfig config;
  EnvironmentFacts environment;
  std::optional<ModelFacts> model;
  std::optional<LoaderFacts> loader;
  std::optional<GpuDecodeSummary> gpu_decode;
  std::optional<LrPlan> lr_schedule;             ///< train mode: the schedule the optimizer follows
  std::optional<LossScalingFacts> loss_scaling;  ///< fp16 training
  RunResult result;
  std::optional<DistFacts> dist;
  std::optional<PartialFacts> partial;
};

}  // namespace workload
