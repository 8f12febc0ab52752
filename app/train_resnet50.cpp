// train_resnet50: the profiling target. Parses flags, runs the Trainer, prints and writes results.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <torch/version.h>

#include "lib/cli.h"
#include "lib/cuda_device.h"
#include "lib/dist_env.h"
#include "lib/distributed.h"
#include "lib/report.h"
#include "lib/train_cli.h"
#include "lib/trainer.h"
#include "lib/version.h"

namespace {

// SIGINT/SIGTERM. A process-directed signal goes to any thread that does not block it, and some of
// those threads are not ours: a profiler's injection library (Nsight Systems preloads one) starts
// threads before main() with the default mask. So the signals get a real handler, which runs in
// whichever thread the kernel picks: it records the first signal and wakes the watcher thread
// through a pipe (both async-signal-safe), and the watcher asks the trainer to stop in ordinary
// code; a second signal ends the process at once. The threads this program starts block both
// signals (the mask is set before any of them starts), so their system calls are not interrupted;
// the watcher unblocks them, so there is always a thread to take one.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "g_signal is used in a signal handler");
int g_wake[2] = {-1, -1};  // written by the handler, read by the watcher
std::mutex g_trainer_mu;   // held while the watcher uses g_trainer
workload::Trainer* g_trainer = nullptr;

extern "C" void on_stop_signal(int sig) {
  const int saved_errno = errno;
  int none = 0;
  if (!g_signal.compare_exchange_strong(none, sig)) std::_Exit(128 + sig);
  const unsigned char byte = static_cast<unsigned char>(sig);
  const ssize_t written = ::write(g_wake[1], &byte, 1);
  static_cast<void>(written);  // nothing to do about a failure inside a handler
  errno = saved_errno;
}

void start_signal_thread(std::shared_ptr<workload::StopRequest> stop) {
  if (::pipe2(g_wake, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("cannot create the signal pipe: ") + std::strerror(errno));
  }
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  action.sa_mask = stop_signals;
  action.sa_flags = SA_RESTART;
  if (::sigaction(SIGINT, &action, nullptr) != 0 || ::sigaction(SIGTERM, &action, nullptr) != 0) {
    throw std::runtime_error(std::string("cannot install the signal handlers: ") +
                             std::strerror(errno));
  }
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // inherited by every thread started later
  // The watcher lives as long as the process: it is also the thread of ours that takes a second
  // signal (the handler then exits).
  std::thread([stop_signals, stop = std::move(stop)] {
    pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
    for (;;) {
      unsigned char byte = 0;
      const ssize_t n = ::read(g_wake[0], &byte, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n != 1) break;
      const int sig = byte;
      std::fprintf(stderr, "train_resnet50: %s received: stopping (again to exit at once)\n",
                   sig == SIGINT ? "SIGINT" : "SIGTERM");
      stop->request(sig);
      std::lock_guard<std::mutex> lock(g_trainer_mu);
      if (g_trainer) g_trainer->request_stop(sig);
    }
    for (;;) pause();  // the pipe failed: stay, to take signals
  }).detach();
}

void print_step(const std::string& prefix, const workload::StepRecord& r, int warmup_total,
                int steps_total) {
  std::printf("%s[%s %d/%d] batch_wait %8.2f ms | h2d_submit %6.2f ms | step %8.2f ms\n",
              prefix.c_str(), r.warmup ? "warmup" : "step  ", r.index + 1,
              r.warmup ? warmup_total : steps_total, r.batch_wait_ms, r.h2d_submit_ms, r.step_ms);
  std::fflush(stdout);
}

// The name errors are printed under: "train_resnet50", or "train_resnet50 (rank 1)" for a rank of
// a distributed run, whose output interleaves with the other ranks'.
std::string program_label() {
  const char* rank = std::getenv("RANK");
  return rank && *rank ? "train_resnet50 (rank " + std::string(rank) + ")" : "train_resnet50";
}

// The exit status of a run: 0, or 128 + the signal it stopped for, or kExitPeerLost when the
// watchdog ended it on a lost peer (the one line saying so printed here, first on stderr).
int run_status(const workload::Trainer& trainer, const workload::RunResult& result,
               const std::string& report) {
  if (!result.aborted.empty() && trainer.stop_requested() < 0) {
    std::fprintf(stderr, "%s: error: %s; the run stopped after %lld steps%s\n",
                 program_label().c_str(), result.aborted.c_str(),
                 static_cast<long long>(result.warmup_steps.size() + result.steps.size()),
                 report.empty() ? "" : ("; report: " + report).c_str());
    return workload::kExitPeerLost;
  }
  if (!result.aborted.empty()) {
    std::fprintf(stderr, "%s: %s\n", program_label().c_str(), result.aborted.c_str());
  }
  if (result.interrupted) return 128 + trainer.stop_signal();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  workload::init_torch_logging(argv[0]);
  return workload::run_main(
      "train_resnet50",
      [&] {
        // Before anything starts CUDA (the parser's device default does).
        workload::default_cuda_connections(workload::cuda_connections_for_args(argc, argv));
        const workload::ParsedArgs args = workload::parse_train_args(argc, argv);
        if (args.help) {
          std::cout << args.help_text << std::endl;
          return 0;
        }
        if (args.version) {
          std::cout << "train_resnet50 " << workload::kWorkloadVersion << " (LibTorch "
                    << TORCH_VERSION
                    << ", CUDA device: " << (workload::cuda_available() ? "yes" : "no") << ")"
                    << std::endl;
          return 0;
        }
        const workload::TrainConfig& c = args.config;
        if (args.print_config) {
          std::cout << workload::config_json(c).dump(2) << std::endl;
          return 0;
        }
        // Under torchrun (or scripts/launch_local.sh): one rank of a data-parallel run.
        const std::optional<workload::DistEnv> dist = workload::read_dist_env();
        const std::string report =
            c.report.empty() || !dist ? c.report : workload::rank_report_path(c.report, dist->rank);
        const std::string prefix = dist ? "[rank " + std::to_string(dist->rank) + "] " : "";
        const auto stop = std::make_shared<workload::StopRequest>();
        start_signal_thread(stop);

        std::optional<workload::Trainer> made;
        try {
          made.emplace(c, dist, stop);
        } catch (const workload::RendezvousStopped& e) {
          std::fprintf(stderr, "%s: %s\n", program_label().c_str(), e.what());
          return 128 + e.signal();
        } catch (const workload::PeerLost& e) {
          std::fprintf(stderr, "%s: error: %s; the run stopped before its first step\n",
                       program_label().c_str(), e.what());
          return stop->requested() >= 0 ? 128 + stop->requested()
                                        : workload::exit_code(e.verdict());
        }
        workload::Trainer& trainer = *made;
        // The signal thread may call into the trainer only while it exists, whatever way this scope
        // is left (an exception included).
        struct Publish {
          explicit Publish(workload::Trainer* t) {
            std::lock_guard<std::mutex> lock(g_trainer_mu);
            g_trainer = t;
          }
          ~Publish() {
            std::lock_guard<std::mutex> lock(g_trainer_mu);
            g_trainer = nullptr;
          }
        } publish(&trainer);
        if (const int sig = g_signal.load()) trainer.request_stop(sig);  // arrived while setting up
        const data_pipeline::LoaderOptions& lo = c.loader;
        std::printf(
            "%strain_resnet50 %s: %s, batch %lld, %d px, %d warm-up + %d captured steps, %s\n",
            prefix.c_str(), workload::kWorkloadVersion, trainer.on_cuda() ? "cuda" : "cpu",
            static_cast<long long>(lo.batch_size), lo.transform.image_size, c.warmup, c.steps,
            c.synthetic
                ? "synthetic batches (no loader)"
                : ("workers " + std::to_string(lo.workers) + ", prefetch " +
                   std::to_string(lo.prefetch_factor) + ", pinned " +
                   (trainer.input().host_ring()->pinned ? "yes" : "no") + ", " +
                   to_string(lo.work_unit) + " unit, iterator " +
                   (c.reuse_iterator ? "reused" : "reset") + ", decode " + to_string(lo.decode))
                      .c_str());
        const workload::TrainConfig article;
        if (c.precision != article.precision ||
            lo.transform.dtype != article.loader.transform.dtype || c.mode != article.mode ||
            c.nvtx_detail != article.nvtx_detail || c.sync_every_step || c.cuda_graph ||
            c.fused_bn || !c.torch_profiler_trace.empty()) {
          const std::string bn = c.mode == workload::RunMode::kForward
                                     ? std::string(" (BN ") + to_string(c.forward_bn) + ")"
                                     : "";
          std::printf(
              "experiment: precision %s, host dtype %s, mode %s%s, nvtx detail %s%s%s%s%s\n",
              to_string(c.precision), to_string(lo.transform.dtype), to_string(c.mode), bn.c_str(),
              to_string(c.nvtx_detail),
              c.fused_bn ? ", batch norm fused with ReLU and add (cuDNN)" : "",
              c.cuda_graph ? ", step replayed from a CUDA graph" : "",
              c.sync_every_step ? ", loss read every step" : "",
              c.torch_profiler_trace.empty()
                  ? ""
                  : (", torch profiler trace " + c.torch_profiler_trace).c_str());
        }
        if (const workload::Distributed* d = trainer.distributed()) {
          std::printf(
              "%sdistributed: rank %d of %d, local rank %d, %s, store %s:%d, batch %lld per rank\n",
              prefix.c_str(), d->rank(), d->world_size(), d->env().local_rank,
              to_string(d->backend()), d->env().master_addr.c_str(), d->env().master_port,
              static_cast<long long>(lo.batch_size));
        }
        for (const auto& n : trainer.notices())
          std::printf("%snote: %s\n", prefix.c_str(), n.c_str());
        std::fflush(stdout);

        workload::Trainer::Progress progress;
        if (!c.quiet) {
          progress = [&](const workload::StepRecord& r) {
            print_step(prefix, r, c.warmup, c.steps);
          };
        }
        const workload::RunResult result = trainer.run(progress);
        std::printf("%s", workload::format_summary(trainer, result).c_str());
        if (!report.empty()) {
          workload::write_report(report, workload::make_report(trainer, result));
          std::printf("  %-28s %s\n", "report", report.c_str());
        }
        std::fflush(stdout);
        return run_status(trainer, result, report);
      },
      program_label());
}
