// The factory of the step's input sources (lib/input/input_source.h).
#include "lib/input/input_source.h"

#include <stdexcept>
#include <string>

#include "lib/device/cuda_connections.h"
#include "lib/input/gpu_decode_input.h"
#include "lib/input/host_loader_input.h"
#include "lib/input/synthetic_input.h"

namespace workload {

namespace dp = data_pipeline;

std::unique_ptr<InputSource> make_input_source(const InputContext& ctx) {
  const TrainConfig& c = ctx.config;
  if (c.synthetic) {
    return std::make_unique<SyntheticInput>(c.loader, ctx.num_classes, ctx.device);
  }
  dp::LoaderOptions options = c.loader;
  options.pin_memory = c.loader.pin_memory && ctx.device.is_cuda();  // pinning serves copies only
  options.shard_count = ctx.shard_count;
  options.shard_index = ctx.shard_index;
  if (c.loader.decode == dp::DecodeDevice::kGpu) {
    const std::string connections =
        cuda_connections_notice(input_cuda_connections(c), current_cuda_connections().value);
    if (!connections.empty()) ctx.notices.push_back(connections);
    return make_gpu_decode_input(ctx.index, options, ctx.device, ctx.notices);
  }
  auto source = std::make_unique<HostLoaderInput>(ctx.index, options, ctx.device, c.copy_stream);
  const std::string pinning =
      pinning_notice(c.loader.pin_memory, source->host_ring()->pinned, ctx.device.is_cuda());
  if (!pinning.empty()) ctx.notices.push_back(pinning);
  return source;
}

void InputSource::reset_to(std::int64_t epoch) {
  throw std::logic_error("InputSource::reset_to(" + std::to_string(epoch) +
                         "): this source has no epochs");
}

bool input_wants_priority_stream(const TrainConfig& config) {
  return config.loader.decode == dp::DecodeDevice::kGpu;
}

int input_cuda_connections(const TrainConfig& config) {
  return cuda_connections_for(config.loader.decode == dp::DecodeDevice::kGpu,
                              config.device == Device::kCuda);
}

std::string pinning_notice(bool requested, bool pinned, bool cuda) {
  if (!requested || pinned) return {};
  return "pinned memory unavailable (" + std::string(cuda ? "cudaHostAlloc failed" : "CPU device") +
         "): batches are in pageable memory";
}

}  // namespace workload
