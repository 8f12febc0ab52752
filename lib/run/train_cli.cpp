// train_resnet50's command line: the flag table declared to cxxopts, parsed and validated.
#include "lib/run/train_cli.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "data_pipeline/food101_index.h"
#include "lib/config/flag_table.h"
#include "lib/config/train_flags.h"
#include "lib/core/output_file.h"
#include "lib/device/cuda_device.h"
#include "lib/distributed/data_parallel.h"
#include "lib/run/checkpoint.h"
#include "lib/run/stall_injector.h"

namespace workload {

namespace {

DistBackend backend_for(Device device) {
  return device == Device::kCuda ? DistBackend::kNccl : DistBackend::kGloo;
}

// --help, --version and --print-config: booleans like the table's (--flag=false is false).
void declare_requests(cxxopts::Options& options) {
  options.add_options(kOutputGroup)("h,help", "print this help", request_value())(
      "version", "print the version", request_value())(
      "print-config",
      "validate the flags, print the resolved configuration as JSON (the report's `config` "
      "object) and exit",
      request_value());
}

namespace fs = std::filesystem;

bool is_within(const fs::path& path, const fs::path& dir) {
  if (path.empty() || dir.empty()) return false;
  auto [d, p] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  return d == dir.end() && p != path.end();
}

// The run's outputs (--report, --torch-profiler-trace) may not replace what it reads or keeps: a
// file its --checkpoint-dir keeps (a checkpoint, the one resumed from included, or the lock), or a
// file of the dataset --data names.
void check_outputs_spare_inputs(const TrainConfig& c) {
  const fs::path checkpoints =
      c.checkpoint_dir.empty() ? fs::path() : output_target(c.checkpoint_dir);
  const std::optional<fs::path> dataset =
      c.data.empty() ? std::nullopt : data_pipeline::find_dataset_dir(c.data);
  const fs::path data = dataset ? output_target(dataset->string()) : fs::path();
  const std::pair<const char*, const std::string*> outputs[] = {
      {"--report", &c.report}, {"--torch-profiler-trace", &c.torch_profiler_trace}};
  for (const auto& [flag, path] : outputs) {
    if (path->empty()) continue;
    const fs::path target = output_target(*path);
    if (!checkpoints.empty() && !target.empty() && target.parent_path() == checkpoints &&
        is_checkpoint_dir_file(target.filename().string())) {
      throw UsageError(std::string(flag) + " " + *path + ": a file --checkpoint-dir " +
                       c.checkpoint_dir + " keeps (checkpoints and their lock); give the " +
                       "output another name");
    }
    if (is_within(target, data)) {
      throw UsageError(std::string(flag) + " " + *path + ": inside the dataset --data " + c.data +
                       " reads (" + dataset->string() + "); write the output elsewhere");
    }
  }
}

}  // namespace

TrainConfig default_train_config() {
  TrainConfig c;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  c.loader.workers = static_cast<int>(std::min(8u, hw));
  c.device = cuda_available() ? Device::kCuda : Device::kCpu;
  c.dist_backend = backend_for(c.device);
  return c;
}

void validate_run(const TrainConfig& config) {
  validate(config);
  check_stalls(config);
  // Whether it is valid does not depend on the ranks; an --epochs run's length is known once its
  // split is read (the Trainer checks it then).
  if (config.epochs == 0) plan_lr(config, 1);
  // Checked, not created: --print-config and profile.sh's --dry-run leave no directory behind.
  if (!config.checkpoint_dir.empty()) check_checkpoint_dir(config.checkpoint_dir);
  check_outputs_spare_inputs(config);
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
  declare_requests(options);
  const auto result = parse_command_line(options, argc, argv);

  out.help_text =
      options.help({kDataGroup, kRunGroup, kExperimentsGroup, kDistributedGroup, kOutputGroup});
  out.help = given_boolean(result, "help");
  out.version = !out.help && given_boolean(result, "version");
  if (out.help || out.version) return out;
  FlagReader(result).reject_unmatched();
  ReadFlags reader(result);
  visit_train_flags(out.config, reader);
  // A graph's warm-up is long enough for a data-parallel capture (lib/distributed/data_parallel.h),
  // whatever the launcher: the same command then runs with one process or under torchrun.
  if (out.config.cuda_graph && !reader.given().count("warmup")) {
    out.config.warmup = kDdpGraphWarmup;
  }
  if (!reader.given().count("dist-backend"))
    out.config.dist_backend = backend_for(out.config.device);
  // An --epochs run's steps are its epochs': --warmup means nothing there, --steps the window's.
  if (out.config.epochs > 0 && reader.given().count("warmup")) {
    throw UsageError("--warmup: unused with --epochs (the run's steps are its epochs'); drop it");
  }
  if (out.config.epochs > 0 && !out.config.capture_at && reader.given().count("steps")) {
    throw UsageError(
        "--steps: with --epochs, counts the capture window's steps, and needs "
        "--capture-at");
  }
  out.print_config = given_boolean(result, "print-config");
  validate_run(out.config);
  return out;
}

}  // namespace workload
