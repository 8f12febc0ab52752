// CUDA_DEVICE_MAX_CONNECTIONS (lib/device/cuda_connections.h).
#include "lib/device/cuda_connections.h"

#include <atomic>
#include <cstdlib>

namespace workload {

namespace {
std::atomic<bool> g_set_here{false};
}  // namespace

int cuda_connections_for(bool gpu_decode, bool cuda_device) {
  return gpu_decode && cuda_device ? kGpuDecodeCudaConnections : 0;
}

int cuda_connections_for_args(int argc, const char* const* argv) {
  const std::string flag = "--decode";
  std::string decode;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;  // what follows is positional
    if (arg == flag && i + 1 < argc) {
      decode = argv[++i];
    } else if (arg.rfind(flag + "=", 0) == 0) {
      decode = arg.substr(flag.size() + 1);
    }
  }
  return decode == "gpu" ? kGpuDecodeCudaConnections : 0;
}

bool default_cuda_connections(int connections) {
  if (connections <= 0 || std::getenv(kCudaConnectionsVariable) != nullptr) return false;
  if (setenv(kCudaConnectionsVariable, std::to_string(connections).c_str(), 0) != 0) return false;
  g_set_here = true;
  return true;
}

CudaConnections current_cuda_connections() {
  CudaConnections c;
  if (const char* v = std::getenv(kCudaConnectionsVariable)) {
    c.value = v;
    c.from = g_set_here ? "program" : "environment";
  }
  return c;
}

std::string cuda_connections_notice(int wanted, const std::optional<std::string>& found) {
  if (wanted <= 0) return {};
  if (found) {
    char* end = nullptr;
    const long given = std::strtol(found->c_str(), &end, 10);
    if (end != found->c_str() && *end == '\0' && given >= wanted) return {};
  }
  return std::string("--decode gpu: ") + kCudaConnectionsVariable + " is " +
         (found ? "'" + *found + "'" : std::string("unset (CUDA's default, 8)")) +
         ": the step's stream shares hardware queues with nvJPEG's streams, whose work waits for "
         "the JPEG engines, and the step waits with it; with " +
         std::to_string(wanted) +
         " (what train_resnet50 sets when the variable is unset) eager bf16 ran 3% faster "
         "(docs/BENCHMARKS.md)";
}

}  // namespace workload
