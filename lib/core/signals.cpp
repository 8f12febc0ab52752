// SIGINT, SIGTERM and SIGHUP for a run (lib/core/signals.h).
#include "lib/core/signals.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
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

extern "C" void on_stop_signal(int sig) {
  const int saved_errno = errno;
  int none = 0;
  if (!g_signal.compare_exchange_strong(none, sig)) std::_Exit(exit_status(Ending::kStopped, sig));
  const unsigned char byte = static_cast<unsigned char>(sig);
  const ssize_t written = ::write(g_wake[1], &byte, 1);
  static_cast<void>(written);  // nothing to do about a failure inside a handler
  errno = saved_errno;
}

void watch(sigset_t stop_signals, const std::shared_ptr<StopRequest>& stop) {
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  for (;;) {
    // poll() before read(): ThreadSanitizer runs a handler at once only in a thread blocked in a
    // call it knows to block (poll, not read), and would otherwise hold it, and the stop, forever.
    pollfd readable{g_wake[0], POLLIN, 0};
    if (::poll(&readable, 1, -1) < 0 && errno == EINTR) continue;
    unsigned char byte = 0;
    const ssize_t n = ::read(g_wake[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n != 1) break;
    const int sig = byte;
    std::fprintf(stderr, "%s: %s received: stopping (again to exit at once)\n",
                 program_invocation_short_name, signal_name(sig).c_str());
    stop->request(sig);
    const std::lock_guard<std::mutex> lock(g_target_mu);
    if (target()) target()(sig);
  }
  for (;;) pause();  // the pipe failed: stay, to take signals
}

}  // namespace

SignalWatcher::SignalWatcher(std::shared_ptr<StopRequest> stop) {
  if (::pipe2(g_wake, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("cannot create the signal pipe: ") + std::strerror(errno));
  }
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
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
  // Also the thread of ours that takes a second signal (the handler then exits).
  std::thread([stop_signals, stop = std::move(stop)] { watch(stop_signals, stop); }).detach();
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
