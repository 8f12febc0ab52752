// Tests for DistWatchdog on an in-memory store: a silent peer or store is missing after the peer
// timeout and a live one never is, a failed store and another rank's announcement end the run at
// once, a stop request aborts only when no step boundary comes, the rendezvous has a deadline, the
// last resort runs only when the trainer's thread does not come back, and the store's rank waits
// for the others to finish.
#include "lib/distributed/watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "lib/core/exit_status.h"

namespace workload {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The store every rank of a test shares; it can freeze (operations block until thawed or broken)
// and break (operations throw, as on a closed connection).
class FakeStore {
 public:
  std::int64_t add(const std::string& key, std::int64_t delta) {
    std::unique_lock<std::mutex> lock(mu_);
    wait_usable(lock);
    return counters_[key] += delta;
  }
  void set_once(const std::string& key, const std::string& value) {
    std::unique_lock<std::mutex> lock(mu_);
    wait_usable(lock);
    values_.emplace(key, value);
  }
  std::optional<std::string> get(const std::string& key) {
    std::unique_lock<std::mutex> lock(mu_);
    wait_usable(lock);
    const auto it = values_.find(key);
    if (it == values_.end()) return std::nullopt;
    return it->second;
  }
  void freeze() {
    std::lock_guard<std::mutex> lock(mu_);
    frozen_ = true;
  }
  void do_break() {
    std::lock_guard<std::mutex> lock(mu_);
    broken_ = true;
    cv_.notify_all();
  }

 private:
  void wait_usable(std::unique_lock<std::mutex>& lock) {
    cv_.wait(lock, [&] { return !frozen_ || broken_; });
    if (broken_) throw std::runtime_error("Connection reset by peer");
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool frozen_ = false;
  bool broken_ = false;
  std::map<std::string, std::int64_t> counters_;
  std::map<std::string, std::string> values_;
};

// One rank's connection to the shared store.
class FakeConnection : public HeartbeatStore {
 public:
  explicit FakeConnection(std::shared_ptr<FakeStore> store) : store_(std::move(store)) {}
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    return store_->add(key, delta);
  }
  void set_once(const std::string& key, const std::string& value) override {
    store_->set_once(key, value);
  }
  std::optional<std::string> get_if_set(const std::string& key) override {
    return store_->get(key);
  }

 private:
  std::shared_ptr<FakeStore> store_;
};

// Another rank that beats (or not) on its own thread.
class Peer {
 public:
  Peer(std::shared_ptr<FakeStore> store, int rank) : store_(std::move(store)), rank_(rank) {
    thread_ = std::thread([this] {
      try {
        while (!quit_.load()) {
          if (beating_.load()) store_->add("hb/" + std::to_string(rank_), 1);
          std::this_thread::sleep_for(milliseconds(20));
        }
      } catch (const std::exception&) {
        // The store broke: this peer's heartbeat ends with it.
      }
    });
  }
  ~Peer() {
    quit_.store(true);
    thread_.join();
  }
  void silence() { beating_.store(false); }

 private:
  std::shared_ptr<FakeStore> store_;
  int rank_;
  std::atomic<bool> beating_{true};
  std::atomic<bool> quit_{false};
  std::thread thread_;
};

class DistWatchdogTest : public ::testing::Test {
 protected:
  // Rank `rank` of 2, the store served by rank 0; short periods so that a test takes a second.
  static WatchdogOptions options(int rank = 0) {
    WatchdogOptions o;
    o.rank = rank;
    o.world_size = 2;
    o.beat = milliseconds(50);
    o.peer_timeout = milliseconds(400);
    o.stop_grace = milliseconds(300);
    o.unwind_grace = milliseconds(300);
    o.store_rank = 0;
    o.store = "127.0.0.1:29500";
    return o;
  }
  DistWatchdog::Hooks hooks() {
    DistWatchdog::Hooks h;
    h.abort = [this](const DistVerdict&) { ++aborts_; };
    h.give_up = [this](const DistVerdict&) { ++give_ups_; };
    h.stop_requested = [this] { return signal_.load(); };
    return h;
  }
  std::unique_ptr<DistWatchdog> running(int rank = 0) {
    auto w = std::make_unique<DistWatchdog>(options(rank), hooks(),
                                            Clock::now() + std::chrono::hours(1));
    w->start_heartbeat([s = store_] { return std::make_unique<FakeConnection>(s); });
    return w;
  }

  std::shared_ptr<FakeStore> store_ = std::make_shared<FakeStore>();
  std::atomic<int> aborts_{0};
  std::atomic<int> give_ups_{0};
  std::atomic<int> signal_{-1};
};

TEST_F(DistWatchdogTest, ASilentPeerIsMissingAfterThePeerTimeout) {
  Peer peer(store_, 1);
  const auto w = running();
  std::this_thread::sleep_for(milliseconds(600));
  EXPECT_FALSE(w->verdict()) << "a beating peer is live";
  peer.silence();
  const auto t = Clock::now();
  const std::optional<DistVerdict> v = w->wait_verdict(milliseconds(3000));
  ASSERT_TRUE(v);
  EXPECT_GE(seconds_since(t), 0.3);
  EXPECT_LT(seconds_since(t), 1.0);
  EXPECT_EQ(v->kind, DistVerdict::Kind::kPeerLost);
  EXPECT_EQ(v->rank, 1);
  EXPECT_NE(v->reason.find("rank 1 missing: no heartbeat for"), std::string::npos) << v->reason;
  EXPECT_EQ(exit_status_of(*v), kExitPeerLost);
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(aborts_.load(), 1);
  // The others learn it from this rank's announcement.
  EXPECT_EQ(store_->get("abort").value_or("").rfind("0|1|rank 1 missing", 0), 0u);
  w->stand_down();
}

TEST_F(DistWatchdogTest, ALivePeerIsNeverMissingHoweverLongItsStep) {
  Peer peer(store_, 1);
  const auto w = running();
  // No boundary, no collective, for five peer timeouts: liveness is not progress.
  std::this_thread::sleep_for(milliseconds(2000));
  EXPECT_FALSE(w->verdict());
  EXPECT_EQ(aborts_.load(), 0);
}

TEST_F(DistWatchdogTest, TheLossOfTheStoreIsItsRanksAtOnce) {
  Peer peer(store_, 0);
  const auto w = running(/*rank=*/1);
  std::this_thread::sleep_for(milliseconds(200));
  const auto t = Clock::now();
  store_->do_break();
  const std::optional<DistVerdict> v = w->wait_verdict(milliseconds(3000));
  ASSERT_TRUE(v);
  EXPECT_LT(seconds_since(t), 0.3);
  EXPECT_EQ(v->rank, 0);
  EXPECT_NE(v->reason.find("rank 0 missing: the store it serves at 127.0.0.1:29500 is gone"),
            std::string::npos)
      << v->reason;
  w->stand_down();
}

TEST_F(DistWatchdogTest, AStoreThatStopsAnsweringIsMissingAfterThePeerTimeout) {
  Peer peer(store_, 0);
  const auto w = running(/*rank=*/1);
  std::this_thread::sleep_for(milliseconds(200));
  const auto t = Clock::now();
  store_->freeze();
  const std::optional<DistVerdict> v = w->wait_verdict(milliseconds(3000));
  ASSERT_TRUE(v);
  EXPECT_GE(seconds_since(t), 0.3);
  EXPECT_LT(seconds_since(t), 1.0);
  EXPECT_EQ(v->rank, 0);
  EXPECT_NE(v->reason.find("has not answered for"), std::string::npos) << v->reason;
  store_->do_break();  // as the abort's shutdown of the store's connections does
  w->stand_down();
}

TEST_F(DistWatchdogTest, AnotherRanksAnnouncementEndsTheRunAtOnce) {
  Peer peer(store_, 1);
  const auto w = running();
  std::this_thread::sleep_for(milliseconds(100));
  store_->set_once("abort", "1|1|rank 1 failed: 100001.jpg: cannot decode");
  const std::optional<DistVerdict> v = w->wait_verdict(milliseconds(500));
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rank, 1);
  EXPECT_EQ(v->reason, "rank 1 failed: 100001.jpg: cannot decode");
  w->stand_down();
}

TEST_F(DistWatchdogTest, ThisRanksFailureIsAnnounced) {
  Peer peer(store_, 1);
  const auto w = running();
  w->announce_failure("forward of captured step 3: out of memory\nbacktrace...");
  for (int i = 0; i < 100 && !store_->get("abort"); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(store_->get("abort").value_or(""),
            "0|0|rank 0 failed: forward of captured step 3: out of memory");
  EXPECT_FALSE(w->verdict()) << "its own announcement is no verdict";
}

TEST_F(DistWatchdogTest, AStopRequestAbortsOnlyWhenNoStepBoundaryComes) {
  Peer peer(store_, 1);
  const auto w = running();
  signal_.store(SIGTERM);
  // Boundaries keep coming: the ranks are agreeing on a stop.
  for (int i = 0; i < 20; ++i) {
    w->boundary();
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_FALSE(w->verdict());
  const auto t = Clock::now();
  const std::optional<DistVerdict> v = w->wait_verdict(milliseconds(3000));
  ASSERT_TRUE(v);
  EXPECT_GE(seconds_since(t), 0.2);
  EXPECT_LT(seconds_since(t), 1.0);
  EXPECT_EQ(v->kind, DistVerdict::Kind::kStop);
  EXPECT_EQ(v->signal, SIGTERM);
  EXPECT_EQ(exit_status_of(*v), 128 + SIGTERM);
  EXPECT_NE(v->reason.find("SIGTERM: no step boundary"), std::string::npos) << v->reason;
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(store_->get("abort").value_or("").rfind("0|0|rank 0 stopped: SIGTERM", 0), 0u);
  w->stand_down();
}

TEST_F(DistWatchdogTest, TheRendezvousEndsAtItsDeadlineOrAtOnceOnAStopRequest) {
  {
    const auto t = Clock::now();
    DistWatchdog w(options(), hooks(), t + milliseconds(200));
    const std::optional<DistVerdict> v = w.wait_verdict(milliseconds(3000));
    ASSERT_TRUE(v);
    EXPECT_EQ(v->kind, DistVerdict::Kind::kDeadline);
    EXPECT_GE(seconds_since(t), 0.2);
    EXPECT_LT(seconds_since(t), 0.6);
    EXPECT_EQ(exit_status_of(*v), 2);
    w.stand_down();
  }
  EXPECT_EQ(aborts_.load(), 1);
  EXPECT_EQ(give_ups_.load(), 0);
  // A stop request has nothing to unwind before the run: the last resort at once, no abort.
  {
    DistWatchdog w(options(), hooks(), Clock::now() + std::chrono::hours(1));
    signal_.store(SIGINT);
    const auto t = Clock::now();
    const std::optional<DistVerdict> v = w.wait_verdict(milliseconds(3000));
    ASSERT_TRUE(v);
    EXPECT_EQ(v->kind, DistVerdict::Kind::kStop);
    EXPECT_TRUE(v->in_rendezvous);
    EXPECT_EQ(v->signal, SIGINT);
    EXPECT_EQ(v->reason, "SIGINT during the rendezvous (rank 0 of 2, store 127.0.0.1:29500)");
    EXPECT_EQ(exit_status_of(*v), 128 + SIGINT);
    while (give_ups_.load() == 0 && seconds_since(t) < 1.0) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    EXPECT_LT(seconds_since(t), 0.3);
    EXPECT_EQ(w.state(), DistWatchdog::WatchState::kGaveUp);
  }
  EXPECT_EQ(aborts_.load(), 1);
  EXPECT_EQ(give_ups_.load(), 1);
}

// A rendezvous that takes long says what it waits for, once at waiting_notice and then every six
// times as long; one that completes says nothing more.
TEST_F(DistWatchdogTest, ALongRendezvousSaysItWaits) {
  WatchdogOptions o = options();
  o.waiting_notice = milliseconds(150);
  std::atomic<int> notices{0};
  DistWatchdog::Hooks h = hooks();
  h.waiting = [&](Clock::duration waited) {
    EXPECT_GE(waited, milliseconds(150));
    ++notices;
  };
  DistWatchdog w(o, h, Clock::now() + std::chrono::hours(1));
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(notices.load(), 1) << "at 150 ms, not again before 1050 ms";
  w.start_heartbeat([s = store_] { return std::make_unique<FakeConnection>(s); });
  EXPECT_EQ(w.state(), DistWatchdog::WatchState::kWatching);
  std::this_thread::sleep_for(milliseconds(900));
  EXPECT_EQ(notices.load(), 1);
  w.stand_down();
}

// The watchdog's states: watching once the heartbeat starts, aborted on a verdict, stood down when
// the trainer's thread is back, stopped at the end; nothing moves it back.
TEST_F(DistWatchdogTest, ItMovesThroughItsStatesInOrder) {
  Peer peer(store_, 1);
  DistWatchdog w(options(), hooks(), Clock::now() + std::chrono::hours(1));
  EXPECT_EQ(w.state(), DistWatchdog::WatchState::kRendezvous);
  w.start_heartbeat([s = store_] { return std::make_unique<FakeConnection>(s); });
  EXPECT_EQ(w.state(), DistWatchdog::WatchState::kWatching);
  peer.silence();
  ASSERT_TRUE(w.wait_verdict(milliseconds(3000)));
  EXPECT_EQ(w.state(), DistWatchdog::WatchState::kAborted);
  w.stand_down();
  EXPECT_EQ(w.state(), DistWatchdog::WatchState::kStoodDown);
  w.start_heartbeat([s = store_] { return std::make_unique<FakeConnection>(s); });
  EXPECT_EQ(w.state(), DistWatchdog::WatchState::kStoodDown) << "no way back";
  w.stop();
  EXPECT_EQ(w.state(), DistWatchdog::WatchState::kStopped);
}

// The announcement crosses processes: one encoder, one decoder, and values that are not one
// refused.
TEST(AnnouncementTest, RoundTripsAndRefusesWhatIsNotOne) {
  const Announcement a{2, 1, "rank 1 missing: no heartbeat for 5.0 s"};
  EXPECT_EQ(encode(a), "2|1|rank 1 missing: no heartbeat for 5.0 s");
  const std::optional<Announcement> back = decode_announcement(encode(a));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->author, 2);
  EXPECT_EQ(back->lost, 1);
  EXPECT_EQ(back->reason, a.reason);
  EXPECT_EQ(decode_announcement("0|0|a | b")->reason, "a | b");  // the reason may hold '|'
  EXPECT_EQ(encode({0, 0, "first\nsecond"}), "0|0|first");       // one line
  for (const char* bad : {"", "1", "1|2", "x|1|r", "1|y|r", "1 |2|r"}) {
    EXPECT_FALSE(decode_announcement(bad)) << bad;
  }
}

TEST_F(DistWatchdogTest, TheLastResortRunsOnlyWhenTheTrainersThreadDoesNotComeBack) {
  {
    DistWatchdog w(options(), hooks(), Clock::now());
    ASSERT_TRUE(w.wait_verdict(milliseconds(3000)));
    std::this_thread::sleep_for(milliseconds(100));
    w.stand_down();  // back within the unwind grace
    std::this_thread::sleep_for(milliseconds(600));
    EXPECT_EQ(give_ups_.load(), 0);
  }
  {
    DistWatchdog w(options(), hooks(), Clock::now());
    ASSERT_TRUE(w.wait_verdict(milliseconds(3000)));
    std::this_thread::sleep_for(milliseconds(800));
    EXPECT_EQ(give_ups_.load(), 1);
  }
}

TEST_F(DistWatchdogTest, TheStoresRankWaitsForTheOthersToFinish) {
  Peer peer(store_, 1);
  const auto w = running(/*rank=*/0);
  std::thread other([&] {
    std::this_thread::sleep_for(milliseconds(300));
    store_->add("done/1", 1);
  });
  const auto t = Clock::now();
  w->finish(milliseconds(3000));
  other.join();
  EXPECT_GE(seconds_since(t), 0.25);
  EXPECT_LT(seconds_since(t), 1.0);
  EXPECT_EQ(store_->add("done/0", 0), 1);
  // A peer that finished is not missing when it falls silent, nor is anyone after finish().
  peer.silence();
  std::this_thread::sleep_for(milliseconds(700));
  EXPECT_FALSE(w->verdict());
}

// A rank that serves the store and announced its failure keeps the store up until the others have
// read the news (they acknowledge it), at most a beat and a half; the others do not wait.
TEST_F(DistWatchdogTest, TheStoresRankKeepsTheStoreUpUntilThePeersReadItsNews) {
  Peer peer(store_, 1);
  WatchdogOptions o = options(/*rank=*/0);
  o.beat = milliseconds(400);
  auto w = std::make_unique<DistWatchdog>(o, hooks(), Clock::now() + std::chrono::hours(1));
  w->start_heartbeat([s = store_] { return std::make_unique<FakeConnection>(s); });
  std::thread reader([&] {
    while (!store_->get("abort")) std::this_thread::sleep_for(milliseconds(10));
    std::this_thread::sleep_for(milliseconds(150));
    store_->add("ack/1", 1);
  });
  w->announce_failure("bad image");
  const auto t = Clock::now();
  w->stop();
  reader.join();
  EXPECT_GE(seconds_since(t), 0.1);
  EXPECT_LT(seconds_since(t), 0.55);  // acknowledged: not the whole 0.6 s
  // Without an acknowledgement it waits the beat and a half, and no more.
  const auto fresh = std::make_shared<FakeStore>();
  Peer deaf(fresh, 1);
  auto lone = std::make_unique<DistWatchdog>(o, hooks(), Clock::now() + std::chrono::hours(1));
  lone->start_heartbeat([s = fresh] { return std::make_unique<FakeConnection>(s); });
  lone->announce_failure("bad image");
  const auto t2 = Clock::now();
  lone->stop();
  EXPECT_GE(seconds_since(t2), 0.55);
  EXPECT_LT(seconds_since(t2), 1.2);
}

TEST_F(DistWatchdogTest, TheStoresRankDoesNotWaitForASilentPeer) {
  Peer peer(store_, 1);
  const auto w = running(/*rank=*/0);
  std::this_thread::sleep_for(milliseconds(100));
  peer.silence();
  const auto t = Clock::now();
  w->finish(milliseconds(5000));
  EXPECT_LT(seconds_since(t), 1.0);  // the peer timeout, not the finish's bound
}

}  // namespace
}  // namespace workload
