// train_resnet50: the profiling target. Parses flags, runs the Trainer, prints and writes results.
#include <c10/util/Exception.h>
#include <torch/version.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>

#include "lib/core/exit_status.h"
#include "lib/core/signals.h"
#include "lib/core/torch_logging.h"
#include "lib/core/version.h"
#include "lib/device/cuda_connections.h"
#include "lib/device/cuda_device.h"
#include "lib/report/report.h"
#include "lib/report/summary_text.h"
#include "lib/run/outcome.h"
#include "lib/run/train_cli.h"
#include "lib/run/trainer.h"

namespace {

using namespace workload;

// "train_resnet50", or "train_resnet50 (rank 1)" for a rank, whose output interleaves with others'.
std::string program_label() {
  const char* rank = std::getenv("RANK");
  return rank && *rank ? "train_resnet50 (rank " + std::string(rank) + ")" : "train_resnet50";
}

// --help, --version and --print-config.
std::string answer(const ParsedArgs& args) {
  if (args.help) return args.help_text;
  if (args.version) {
    return std::string("train_resnet50 ") + kWorkloadVersion + " (LibTorch " + TORCH_VERSION +
           ", CUDA device: " + (cuda_available() ? "yes" : "no") + ")";
  }
  return config_json(args.config).dump(2);
}

// The per-step lines (none with --quiet).
Trainer::Progress progress_lines(const TrainConfig& c, const std::string& prefix) {
  if (c.quiet) return nullptr;
  return [&c, prefix](const StepRecord& r) {
    std::printf("%s", format_step(prefix, r, c.warmup, c.steps).c_str());
    std::fflush(stdout);
  };
}

// --epochs: a line per epoch; on a terminal also a live bar through each epoch's steps.
struct EpochLines {
  const TrainConfig& config;
  std::string prefix;
  std::int64_t steps_per_epoch = 0;
  bool live = false;
  double session_s = 0;  // this session's epochs, for the ETA
  int session_epochs = 0;

  void step(const StepRecord& r) const {
    if (!live || !r.step || steps_per_epoch <= 0) return;
    const std::int64_t epoch = *r.step / steps_per_epoch;
    const std::int64_t done = *r.step % steps_per_epoch + 1;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / steps_per_epoch);
    std::printf("\r%s[epoch %lld/%d] [%s%s] %lld/%lld", prefix.c_str(),
                static_cast<long long>(epoch) + 1, config.epochs,
                std::string(static_cast<std::size_t>(filled), '#').c_str(),
                std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(),
                static_cast<long long>(done), static_cast<long long>(steps_per_epoch));
    std::fflush(stdout);
  }
  void epoch(const EpochRecord& r) {
    session_s += r.epoch_s;
    ++session_epochs;
    const double left = static_cast<double>(config.epochs - (r.epoch + 1));
    const double eta = left > 0 ? left * session_s / session_epochs : -1;
    if (live) std::printf("\r\033[K");
    std::printf("%s", format_epoch(prefix, r, config.epochs, eta).c_str());
    std::fflush(stdout);
  }
};

// LibTorch's allocators end a run that asks for more memory than there is with their own words
// (the bytes asked, an enforce's file and line). What the user can change is a flag: name it.
std::optional<std::string> out_of_memory(const std::exception& e) {
  std::string what;
  bool device = false;
  if (const auto* oom = dynamic_cast<const c10::OutOfMemoryError*>(&e)) {
    what = oom->what_without_backtrace();
    device = true;
  } else if (const auto* err = dynamic_cast<const c10::Error*>(&e)) {
    what = err->what_without_backtrace();
    if (what.find("can't allocate memory") == std::string::npos &&
        what.find("not enough memory") == std::string::npos) {
      return std::nullopt;
    }
  } else if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    what = e.what();
  } else {
    return std::nullopt;
  }
  what = what.substr(0, what.find('\n'));
  return std::string("out of ") + (device ? "GPU" : "host") + " memory (" + what + ")";
}

int finish(const Outcome& outcome) {
  std::fputs(outcome.message.c_str(), stderr);
  return outcome.status;
}

int run_training(const ParsedArgs& args) {
  const std::optional<LaunchEnv> dist = read_launch_env();  // a rank, under torchrun
  const std::string prefix = dist ? "[rank " + std::to_string(dist->rank) + "] " : "";
  const auto stop = std::make_shared<StopRequest>();
  const SignalWatcher signals(stop);
  std::optional<Trainer> trainer;
  try {
    trainer.emplace(args.config, dist, stop);
  } catch (const PeerLost& lost) {
    return finish(setup_outcome(lost, stop->requested(), program_label()));
  }
  const SignalWatcher::Publication publication([&t = *trainer](int sig) { t.request_stop(sig); });
  std::printf("%s", format_banner(trainer->facts(), trainer->notices(), prefix).c_str());
  std::fflush(stdout);
  Trainer::Progress progress = progress_lines(args.config, prefix);
  EpochLines epochs{args.config, prefix, trainer->steps_per_epoch(),
                    !args.config.quiet && isatty(STDOUT_FILENO) != 0};
  if (args.config.epochs > 0) {
    progress = [&epochs](const StepRecord& r) { epochs.step(r); };
    trainer->set_epoch_progress([&epochs](const EpochRecord& r) { epochs.epoch(r); });
  }
  const RunFacts facts = trainer->facts(trainer->run(progress));
  std::printf("%s", format_summary(facts).c_str());
  const std::string& report = trainer->outputs().report;
  if (!report.empty()) {
    write_report(report, report_json(facts));
    std::printf("  %-28s %s\n", "report", report.c_str());
  }
  std::fflush(stdout);
  return finish(run_outcome(facts.result, trainer->stop_requested(), trainer->stop_signal(),
                            program_label(), report));
}

int train(int argc, char** argv) {
  default_cuda_connections(cuda_connections_for_args(argc, argv));  // before anything starts CUDA
  const ParsedArgs args = parse_train_args(argc, argv);
  if (args.help || args.version || args.print_config) {
    std::cout << answer(args) << std::endl;
    return kExitOk;
  }
  try {
    return run_training(args);
  } catch (const std::exception& e) {
    const auto oom = out_of_memory(e);
    if (!oom) throw;
    const TrainConfig& c = args.config;
    throw std::runtime_error(*oom + " at --batch-size " + std::to_string(c.loader.batch_size) +
                             " and --image-size " + std::to_string(c.loader.transform.image_size) +
                             ": lower --batch-size (or --image-size, --prefetch-factor, "
                             "--workers)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  init_torch_logging(argv[0]);
  return run_main(
      "train_resnet50", [&] { return train(argc, argv); }, program_label());
}
