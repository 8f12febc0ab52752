// train_resnet50's command line: the flag table declared to cxxopts, parsed and validated.
#include "lib/train_cli.h"

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "lib/cli.h"
#include "lib/cuda_device.h"
#include "lib/train_flags.h"

namespace workload {

TrainConfig default_train_config() {
  TrainConfig c;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  c.loader.workers = static_cast<int>(std::min(8u, hw));
  c.device = cuda_available() ? Device::kCuda : Device::kCpu;
  c.dist_backend = c.device == Device::kCuda ? DistBackend::kNccl : DistBackend::kGloo;
  return c;
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

ParsedArgs parse_train_args(int argc, const char* const* argv) {
  cxxopts::Options options(
      "train_resnet50",
      "ResNet-50 (channels_last) trained on Food-101 with NVTX ranges around every phase of the "
      "step and cudaProfilerStart/Stop around the captured steps. Run it under\n"
      "  nsys profile --trace=cuda,nvtx,osrt --sample=none --cpuctxsw=none "
      "--capture-range=cudaProfilerApi --capture-range-end=stop --output=NAME train_resnet50 ...\n"
      "Booleans take --flag=false.");
  options.set_width(100);
  ParsedArgs out;
  out.config = default_train_config();
  visit_train_flags(out.config, DeclareFlags(options));
  options.add_options(kOutputGroup)("h,help", "print this help")("version", "print the version")(
      "print-config",
      "validate the flags, print the resolved configuration as JSON (the report's `config` "
      "object) and exit");

  // cxxopts wants mutable argv.
  std::vector<std::string> storage(argv, argv + argc);
  std::vector<char*> args;
  for (auto& s : storage) args.push_back(s.data());
  int n = static_cast<int>(args.size());
  char** pargv = args.data();
  const auto result = options.parse(n, pargv);

  out.help_text =
      options.help({kDataGroup, kRunGroup, kExperimentsGroup, kDistributedGroup, kOutputGroup});
  if (result.count("help")) {
    out.help = true;
    return out;
  }
  if (result.count("version")) {
    out.version = true;
    return out;
  }
  FlagReader(result).reject_unmatched();
  ReadFlags reader(result);
  visit_train_flags(out.config, reader);
  // A graph's warm-up is long enough for a data-parallel capture (lib/dist_env.h), whatever the
  // launcher: the same command then runs with one process or under torchrun.
  if (out.config.cuda_graph && !reader.given().count("warmup")) {
    out.config.warmup = kDdpGraphWarmup;
  }
  if (!reader.given().count("dist-backend")) {
    out.config.dist_backend =
        out.config.device == Device::kCuda ? DistBackend::kNccl : DistBackend::kGloo;
  }
  validate(out.config);
  out.print_config = result.count("print-config") > 0;
  return out;
}

}  // namespace workload
