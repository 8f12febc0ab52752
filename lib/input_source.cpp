// The factory of the step's input sources (lib/input_source.h).
#include "lib/input_source.h"

#include <cstdlib>

#include "lib/cuda_device.h"
#include "lib/distributed.h"
#include "lib/gpu_decode_input.h"
#include "lib/host_loader_input.h"
#include "lib/synthetic_input.h"

namespace workload {

namespace dp = data_pipeline;

std::unique_ptr<InputSource> make_input_source(const InputContext& ctx) {
  const TrainConfig& c = ctx.config;
  if (c.synthetic) {
    return std::make_unique<SyntheticInput>(c.loader, ctx.num_classes, ctx.device);
  }
  dp::LoaderOptions options = c.loader;
  options.pin_memory = c.loader.pin_memory && ctx.device.is_cuda();  // pinning serves copies only
  if (ctx.dist) {
    options.shard_count = ctx.dist->world_size();  // DistributedSampler's shards
    options.shard_index = ctx.dist->rank();
  }
  if (c.loader.decode == dp::DecodeDevice::kGpu) {
    const std::string connections =
        cuda_connections_notice(c, std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"));
    if (!connections.empty()) ctx.notices.push_back(connections);
    return make_gpu_decode_input(ctx.index, options, ctx.device, ctx.notices);
  }
  auto source = std::make_unique<HostLoaderInput>(ctx.index, options, ctx.device, c.copy_stream);
  const std::string pinning =
      pinning_notice(c.loader.pin_memory, source->host_ring()->pinned, ctx.device.is_cuda());
  if (!pinning.empty()) ctx.notices.push_back(pinning);
  return source;
}

bool input_wants_priority_stream(const TrainConfig& config) {
  return config.loader.decode == dp::DecodeDevice::kGpu;
}

int input_cuda_connections(const TrainConfig& config) {
  return config.device == Device::kCuda && config.loader.decode == dp::DecodeDevice::kGpu
             ? kGpuDecodeCudaConnections
             : 0;
}

std::string cuda_connections_notice(const TrainConfig& config, const char* found) {
  const int wanted = input_cuda_connections(config);
  if (wanted == 0) return {};
  const std::string value = found ? found : "";
  char* end = nullptr;
  const long given = found ? std::strtol(found, &end, 10) : 0;
  if (found && end != found && *end == '\0' && given >= wanted) return {};
  return "--decode gpu: CUDA_DEVICE_MAX_CONNECTIONS is " +
         (found ? "'" + value + "'" : std::string("unset (CUDA's default, 8)")) +
         ": the step's stream shares hardware queues with nvJPEG's streams, whose work waits for "
         "the JPEG engines, and the step waits with it; with " +
         std::to_string(wanted) +
         " (what train_resnet50 sets when the variable is unset) eager bf16 ran 3% faster "
         "(docs/BENCHMARKS.md)";
}

std::string pinning_notice(bool requested, bool pinned, bool cuda) {
  if (!requested || pinned) return {};
  return "pinned memory unavailable (" + std::string(cuda ? "cudaHostAlloc failed" : "CPU device") +
         "): batches are in pageable memory";
}

}  // namespace workload
