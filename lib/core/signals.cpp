// SIGINT, SIGTERM and SIGHUP for a run (lib/core/signals.h).
#include "lib/core/signals.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "lib/core/exit_status.h"

namespace workload {

namespace {

std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "g_signal is used in a signal handler");
int g_wake[2] = {-1, -1};  // written by the handler, read by the watcher
std::mutex g_target_mu;    // held while the watcher uses target()

// The published Publication's callback, or empty. Never destroyed: the detached watcher may use it
// while the process exits and runs the destructors of globals.
std::function<void(int)>& target() {
  static auto* const published = new std::function<void(int)>;
  return *published;
}

// SIGINT, SIGTERM and SIGHUP.
sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

// Records the first stop signal; a second one ends the process at once. Async-signal-safe.
void record(int sig) {
  int none = 0;
  if (!g_signal.compare_exchange_strong(none, sig)) std::_Exit(exit_status(Ending::kStopped, sig));
}

// For a thread that does not block the signals (one started before the watcher, such as a
// profiler's injection thread): records the signal and wakes the watcher.
extern "C" void on_stop_signal(int sig) {
  const int saved_errno = errno;
  record(sig);
  const unsigned char byte = static_cast<unsigned char>(sig);
  const ssize_t written = ::write(g_wake[1], &byte, 1);
  static_cast<void>(written);  // nothing to do about a failure inside a handler
  errno = saved_errno;
}

// The signal a readable descriptor holds, or 0 (none, or an interrupted read); -1 when it failed.
int take_from_pipe(int fd) {
  unsigned char byte = 0;
  const ssize_t n = ::read(fd, &byte, 1);
  if (n < 0 && errno == EINTR) return 0;
  return n == 1 ? byte : -1;
}

// From the signalfd, which holds what no thread could take; 0 when another thread's handler took
// it first (EAGAIN).
int take_from_signalfd(int fd) {
  signalfd_siginfo info{};
  const ssize_t n = ::read(fd, &info, sizeof info);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
  if (n != static_cast<ssize_t>(sizeof info)) return -1;
  const int sig = static_cast<int>(info.ssi_signo);
  record(sig);  // a second signal ends the process here
  return sig;
}

// The watcher keeps the signals blocked, as every thread started after it does, and takes them
// from a signalfd: a process-directed signal that no thread of ours can take waits there, and is
// read as data. No handler runs on this thread, so no sanitizer holds one back: ThreadSanitizer
// defers a handler to the thread's next intercepted call, and one run in several dozen under load
// a watcher that took the signal through its handler slept on in poll() (issue 41). The pipe
// carries what the handler took in a thread that does not block the signals.
void watch(int signal_fd, const std::shared_ptr<StopRequest>& stop) {
  for (;;) {
    pollfd readable[2] = {{signal_fd, POLLIN, 0}, {g_wake[0], POLLIN, 0}};
    if (::poll(readable, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    int sig = 0;
    if (readable[0].revents & POLLIN) {
      sig = take_from_signalfd(signal_fd);
    } else if (readable[1].revents & POLLIN) {
      sig = take_from_pipe(g_wake[0]);
    } else if ((readable[0].revents | readable[1].revents) != 0) {
      sig = -1;  // an error or a hang-up on either descriptor
    }
    if (sig == 0) continue;
    if (sig < 0) break;
    std::fprintf(stderr, "%s: %s received: stopping (again to exit at once)\n",
                 program_invocation_short_name, signal_name(sig).c_str());
    stop->request(sig);
    const std::lock_guard<std::mutex> lock(g_target_mu);
    if (target()) target()(sig);
  }
  // A descriptor failed (never seen): the handler takes the signals here from now on, so a second
  // one still ends the process.
  const sigset_t stop_signals = stop_signal_set();
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  for (;;) pause();
}

}  // namespace

SignalWatcher::SignalWatcher(std::shared_ptr<StopRequest> stop) {
  if (::pipe2(g_wake, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("cannot create the signal pipe: ") + std::strerror(errno));
  }
  const sigset_t stop_signals = stop_signal_set();
  // Non-blocking: a signal that woke the watcher's poll() may be taken by the handler in a thread
  // that does not block it before the watcher reads, and a blocking read would then wait for the
  // next signal, leaving the pipe unread (failure_modes_test's thread of another library, SIGHUP).
  const int signal_fd = ::signalfd(-1, &stop_signals, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd < 0) {
    throw std::runtime_error(std::string("cannot create the signal descriptor: ") +
                             std::strerror(errno));
  }
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  action.sa_mask = stop_signals;
  action.sa_flags = SA_RESTART;
  if (::sigaction(SIGINT, &action, nullptr) != 0 || ::sigaction(SIGTERM, &action, nullptr) != 0 ||
      ::sigaction(SIGHUP, &action, nullptr) != 0) {
    throw std::runtime_error(std::string("cannot install the signal handlers: ") +
                             std::strerror(errno));
  }
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // inherited by every thread started later
  std::thread([signal_fd, stop = std::move(stop)] { watch(signal_fd, stop); }).detach();
}

SignalWatcher::Publication::Publication(std::function<void(int)> request_stop) {
  const std::lock_guard<std::mutex> lock(g_target_mu);
  target() = std::move(request_stop);
  if (const int sig = g_signal.load()) target()(sig);  // arrived while setting up
}

SignalWatcher::Publication::~Publication() {
  const std::lock_guard<std::mutex> lock(g_target_mu);
  target() = nullptr;
}

}  // namespace workload
