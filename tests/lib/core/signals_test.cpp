// Tests for the signals of a run (lib/core/signals.h): a first SIGINT, SIGTERM or SIGHUP becomes
// the process's stop request and reaches the published target, one that came before the publication
// is passed on at once, a second one ends the process with 128 + its number, the threads started
// after the watcher leave the signals to it, and one that a thread started before it takes (through
// the handler) reaches it too. The watcher takes the signals for the rest of
// its process's life, so each case runs in a child of its own (a death test, started by fork and
// exec: ThreadSanitizer follows both), which exits 0 when what it saw was right and says what it
// saw.
#include "lib/core/signals.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "lib/core/stop_request.h"

namespace workload {
namespace {

using namespace std::chrono_literals;

// Generous: only a hang waits that long (a busy 2-core machine under ThreadSanitizer answers in
// ms).
constexpr auto kPatience = 60s;

class SignalsTest : public testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

[[noreturn]] void finish(bool ok, const char* what, int requested, int published) {
  std::fprintf(stderr, "%s: requested %d, published %d\n", what, requested, published);
  std::fflush(stderr);
  std::_Exit(ok ? 0 : 1);
}

// Sends `sig` to the whole process and waits (up to kPatience) until it is the stop request and
// has reached the published target; true when it has.
bool send_and_await(int sig, StopRequest& stop, const std::atomic<int>& published) {
  ::kill(::getpid(), sig);
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while ((stop.requested() != sig || published.load() != sig) &&
         std::chrono::steady_clock::now() < deadline) {
    stop.sleep_for(10ms);
  }
  return stop.requested() == sig && published.load() == sig;
}

// A child: the watcher, a target, `sig` sent to the whole process, the request awaited.
void first_signal(int sig) {
  const auto stop = std::make_shared<StopRequest>();
  const SignalWatcher watcher(stop);
  std::atomic<int> published{-1};
  const SignalWatcher::Publication publication([&published](int s) { published = s; });
  const bool ok = send_and_await(sig, *stop, published);
  finish(ok, "after the signal", stop->requested(), published.load());
}

TEST_F(SignalsTest, AFirstSignalIsTheStopRequestAndReachesThePublishedTarget) {
  EXPECT_EXIT(first_signal(SIGTERM), testing::ExitedWithCode(0),
              "SIGTERM received: stopping \\(again to exit at once\\)\n"
              "after the signal: requested 15, published 15");
  EXPECT_EXIT(first_signal(SIGINT), testing::ExitedWithCode(0), "requested 2, published 2");
  EXPECT_EXIT(first_signal(SIGHUP), testing::ExitedWithCode(0), "requested 1, published 1");
}

// A child: SIGHUP before any publication, then a publication, which must pass it on before its
// constructor returns.
void signal_before_publication() {
  const auto stop = std::make_shared<StopRequest>();
  const SignalWatcher watcher(stop);
  ::kill(::getpid(), SIGHUP);
  stop->sleep_for(kPatience);  // until the watcher has asked for the stop
  std::atomic<int> published{-1};
  const SignalWatcher::Publication publication([&published](int s) { published = s; });
  finish(published.load() == SIGHUP, "at the publication", stop->requested(), published.load());
}

TEST_F(SignalsTest, ASignalBeforeThePublicationIsPassedOnAtOnce) {
  EXPECT_EXIT(signal_before_publication(), testing::ExitedWithCode(0),
              "at the publication: requested 1, published 1");
}

// A child: SIGTERM, then SIGINT while the run would be stopping: the handler ends the process with
// 128 + SIGINT before the child can say anything.
void second_signal() {
  const auto stop = std::make_shared<StopRequest>();
  const SignalWatcher watcher(stop);
  ::kill(::getpid(), SIGTERM);
  stop->sleep_for(kPatience);
  ::kill(::getpid(), SIGINT);
  std::this_thread::sleep_for(kPatience);
  finish(false, "still alive after the second signal", stop->requested(), -1);
}

TEST_F(SignalsTest, ASecondSignalEndsTheProcessAtOnceWith128PlusItsNumber) {
  EXPECT_EXIT(second_signal(), testing::ExitedWithCode(128 + SIGINT), "SIGTERM received");
}

// A child: a thread started after the watcher blocks the three signals, so that a process-directed
// one never interrupts its system calls.
void later_thread_mask() {
  const SignalWatcher watcher(std::make_shared<StopRequest>());
  int blocked = 0;
  std::thread([&blocked] {
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    blocked = sigismember(&mask, SIGINT) + sigismember(&mask, SIGTERM) + sigismember(&mask, SIGHUP);
  }).join();
  finish(blocked == 3, "signals blocked in a later thread", blocked, -1);
}

TEST_F(SignalsTest, TheThreadsStartedAfterTheWatcherBlockTheSignals) {
  EXPECT_EXIT(later_thread_mask(), testing::ExitedWithCode(0),
              "signals blocked in a later thread: requested 3");
}

// A child: a thread started before the watcher, with the default mask, as a profiler's injection
// starts one before main(). It is then the only thread that can take a process-directed signal, so
// the handler runs there and wakes the watcher through the pipe. The thread waits in poll(), where
// a sanitizer runs a handler at once.
void signal_in_a_foreign_thread() {
  std::atomic<bool> done{false};
  std::thread foreign([&done] {
    while (!done.load()) ::poll(nullptr, 0, 20);
  });
  const auto stop = std::make_shared<StopRequest>();
  const SignalWatcher watcher(stop);
  std::atomic<int> published{-1};
  const SignalWatcher::Publication publication([&published](int s) { published = s; });
  const bool ok = send_and_await(SIGTERM, *stop, published);
  done = true;
  foreign.join();
  finish(ok, "through the handler", stop->requested(), published.load());
}

TEST_F(SignalsTest, ASignalTakenByAThreadOfAnotherLibraryReachesTheWatcher) {
  EXPECT_EXIT(signal_in_a_foreign_thread(), testing::ExitedWithCode(0),
              "SIGTERM received: stopping \\(again to exit at once\\)\n"
              "through the handler: requested 15, published 15");
}

}  // namespace
}  // namespace workload
