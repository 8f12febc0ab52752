// train_resnet50: the profiling target. Parses flags, runs the Trainer, prints and writes results.
#include <csignal>
#include <cstdio>
#include <iostream>

#include <torch/version.h>

#include "lib/cli.h"
#include "lib/cuda_device.h"
#include "lib/report.h"
#include "lib/train_cli.h"
#include "lib/trainer.h"
#include "lib/version.h"

namespace {

// Set by SIGINT/SIGTERM; the trainer polls it between steps.
std::atomic<int> g_signal{0};

extern "C" void on_signal(int sig) {
  g_signal.store(sig);
  std::signal(sig, SIG_DFL);  // a second signal ends the process the default way
}

void print_step(const workload::StepRecord& r, int warmup_total, int steps_total) {
  std::printf("[%s %d/%d] batch_wait %8.2f ms | h2d_submit %6.2f ms | step %8.2f ms\n",
              r.warmup ? "warmup" : "step  ", r.index + 1,
              r.warmup ? warmup_total : steps_total, r.batch_wait_ms, r.h2d_submit_ms, r.step_ms);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  return workload::run_main("train_resnet50", [&] {
    const workload::ParsedArgs args = workload::parse_train_args(argc, argv);
    if (args.help) {
      std::cout << args.help_text << std::endl;
      return 0;
    }
    if (args.version) {
      std::cout << "train_resnet50 " << workload::kWorkloadVersion << " (LibTorch " << TORCH_VERSION
                << ", CUDA device: " << (workload::cuda_available() ? "yes" : "no") << ")"
                << std::endl;
      return 0;
    }
    const workload::TrainConfig& c = args.config;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);

    workload::Trainer trainer(c);
    std::printf("train_resnet50 %s: %s, batch %lld, %d px, %d warm-up + %d captured steps, %s\n",
                workload::kWorkloadVersion, trainer.on_cuda() ? "cuda" : "cpu",
                static_cast<long long>(c.batch_size), c.image_size, c.warmup, c.steps,
                c.synthetic ? "synthetic batches (no loader)"
                            : ("workers " + std::to_string(c.workers) + ", prefetch " +
                               std::to_string(c.prefetch_factor) + ", pinned " +
                               (trainer.loader()->pinned() ? "yes" : "no") + ", " +
                               data_pipeline::to_string(c.work_unit) + " unit, iterator " +
                               (c.reuse_iterator ? "reused" : "reset"))
                                  .c_str());
    for (const auto& n : trainer.notices()) std::printf("note: %s\n", n.c_str());
    std::fflush(stdout);

    workload::Trainer::Progress progress;
    if (!c.quiet) {
      progress = [&](const workload::StepRecord& r) { print_step(r, c.warmup, c.steps); };
    }
    workload::RunResult result = trainer.run(progress, &g_signal);
    if (result.interrupted) result.interrupt_signal = g_signal.load() == SIGTERM ? "SIGTERM" : "SIGINT";
    std::printf("%s", workload::format_summary(trainer, result).c_str());
    if (!c.report.empty()) {
      workload::write_report(c.report, workload::make_report(trainer, result));
      std::printf("  %-28s %s\n", "report", c.report.c_str());
    }
    std::fflush(stdout);
    if (result.interrupted) return 128 + g_signal.load();
    return 0;
  });
}
