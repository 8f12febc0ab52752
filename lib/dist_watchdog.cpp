// The heartbeat and the watchdog of a data-parallel rank (lib/dist_watchdog.h).
#include "lib/dist_watchdog.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "data_pipeline/nvtx_domain.h"
#include "lib/stop_control.h"

namespace workload {

namespace {

using Clock = std::chrono::steady_clock;

// The watchdog's period: how late after the fact a verdict can come.
constexpr std::chrono::milliseconds kTick{100};
// How long a verdict waits for the heartbeat thread to announce it before aborting (the abort
// closes that thread's connection too).
constexpr std::chrono::milliseconds kAnnounceWait{300};
// How long stop() waits for the heartbeat thread before leaving it behind.
constexpr std::chrono::milliseconds kHeartbeatJoin{1000};
// The heartbeat's period while the store's owner waits for the others to finish.
constexpr std::chrono::milliseconds kFinishPoll{50};

// Store keys, under the run's prefix: each rank's heartbeat counter, its "done" flag, the
// announcement of the first rank that aborts or fails ("<author>|<lost rank>|<reason>"), and each
// rank's acknowledgement of another's announcement.
std::string heartbeat_key(int rank) { return "hb/" + std::to_string(rank); }
std::string done_key(int rank) { return "done/" + std::to_string(rank); }
std::string ack_key(int rank) { return "ack/" + std::to_string(rank); }
constexpr const char* kAbortKey = "abort";

std::string seconds(Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", std::chrono::duration<double>(d).count());
  return buf;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

int exit_code(const DistVerdict& verdict) {
  switch (verdict.kind) {
    case DistVerdict::Kind::kPeerLost:
      return kExitPeerLost;
    case DistVerdict::Kind::kStop:
      return 128 + verdict.signal;
    case DistVerdict::Kind::kDeadline:
      return 2;
  }
  return 1;
}

struct DistWatchdog::State {
  explicit State(const WatchdogOptions& o)
      : options(o),
        seen(static_cast<std::size_t>(o.world_size), 0),
        moved(static_cast<std::size_t>(o.world_size)),
        done(static_cast<std::size_t>(o.world_size), false),
        acked(static_cast<std::size_t>(o.world_size), false) {}

  const WatchdogOptions options;
  mutable std::mutex mu;
  mutable std::condition_variable cv;  // any change below; the threads and waiters re-check

  // The owner's side.
  Clock::time_point deadline;
  bool rendezvous_done = false;
  bool stopping = false;
  bool stood_down = false;
  std::optional<DistVerdict> verdict;
  std::optional<Clock::time_point> aborted_at;  // when the abort hook returned
  bool gave_up = false;
  std::optional<Clock::time_point> stop_seen;  // when the watchdog first saw the stop request
  std::atomic<Clock::rep> last_boundary{0};    // boundary(), lock-free
  std::function<void(const DistVerdict&)> give_up;

  // Requests to the heartbeat thread.
  std::optional<std::string> announcement;  // "<author>|<lost rank>|<reason>"
  bool announced = false;
  bool post_done = false;
  bool done_posted = false;
  bool wait_peers_done = false;
  bool lingering = false;  // stop() keeps the store up until the peers read this rank's news

  // The heartbeat thread's facts.
  bool heartbeat_started = false;
  bool heartbeat_exited = false;
  Clock::time_point watched_since;
  std::optional<Clock::time_point> last_answer;  // the last complete round
  std::vector<std::int64_t> seen;                // each peer's counter as last read
  std::vector<Clock::time_point> moved;          // when it last moved
  std::vector<bool> done;                        // the peer finished cleanly
  std::vector<bool> acked;                       // the peer read this rank's announcement
  std::optional<std::string> store_error;
  std::optional<DistVerdict> peer_abort;  // another rank's announcement
  bool ack_sent = false;                  // ... which this rank acknowledged

  // Every peer is done (or acknowledged this rank's announcement, with `acks`) or silent.
  bool peers_done_or_silent(Clock::time_point now, bool acks = false) const {
    for (int p = 0; p < options.world_size; ++p) {
      const auto i = static_cast<std::size_t>(p);
      if (p == options.rank || done[i] || (acks && acked[i])) continue;
      if (now - moved[i] <= options.peer_timeout) return false;
    }
    return true;
  }
};

namespace {

// Another rank's announcement "<author>|<lost rank>|<reason>" as this rank's verdict.
std::optional<DistVerdict> parse_announcement(const std::string& value, int self) {
  const std::size_t a = value.find('|');
  const std::size_t b = a == std::string::npos ? a : value.find('|', a + 1);
  if (b == std::string::npos) return std::nullopt;
  const int author = std::atoi(value.substr(0, a).c_str());
  if (author == self) return std::nullopt;
  DistVerdict v;
  v.kind = DistVerdict::Kind::kPeerLost;
  v.rank = std::atoi(value.substr(a + 1, b - a - 1).c_str());
  v.reason = value.substr(b + 1);
  if (v.rank != author) v.reason += " (seen by rank " + std::to_string(author) + ")";
  return v;
}

// One round of the heartbeat: beat, read the peers' counters and done flags (and, lingering, their
// acknowledgements) and the announcement, acknowledge another's, then record what was read.
void heartbeat_round(DistWatchdog::State& s, HeartbeatStore& store, bool lingering) {
  const WatchdogOptions& o = s.options;
  store.add(heartbeat_key(o.rank), 1);
  std::vector<std::int64_t> counters(static_cast<std::size_t>(o.world_size), 0);
  std::vector<bool> done(static_cast<std::size_t>(o.world_size), false);
  std::vector<bool> acked(static_cast<std::size_t>(o.world_size), false);
  for (int p = 0; p < o.world_size; ++p) {
    if (p == o.rank) continue;
    const auto i = static_cast<std::size_t>(p);
    counters[i] = store.add(heartbeat_key(p), 0);
    done[i] = store.add(done_key(p), 0) > 0;
    if (lingering) acked[i] = store.add(ack_key(p), 0) > 0;
  }
  const std::optional<std::string> abort = store.get_if_set(kAbortKey);
  const std::optional<DistVerdict> news = abort ? parse_announcement(*abort, o.rank) : std::nullopt;
  bool ack = false;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    ack = news && !s.ack_sent;
  }
  if (ack) store.add(ack_key(o.rank), 1);  // the announcer may keep the store up until it sees this
  std::lock_guard<std::mutex> lock(s.mu);
  if (ack) s.ack_sent = true;
  const Clock::time_point now = Clock::now();
  for (std::size_t p = 0; p < counters.size(); ++p) {
    if (counters[p] != s.seen[p]) {
      s.seen[p] = counters[p];
      s.moved[p] = now;
    }
    if (done[p]) s.done[p] = true;
    if (acked[p]) s.acked[p] = true;
  }
  s.last_answer = now;
  if (news && !s.peer_abort) s.peer_abort = news;
  s.cv.notify_all();
}

void heartbeat_loop(const std::shared_ptr<DistWatchdog::State>& s,
                    const DistWatchdog::Connect& connect) {
  data_pipeline::nvtx::name_current_thread("ddp/heartbeat");
  const WatchdogOptions& o = s->options;
  try {
    const std::unique_ptr<HeartbeatStore> store = connect();
    for (;;) {
      std::optional<std::string> announce;
      bool post_done = false;
      bool stopping = false;
      bool finishing = false;
      bool lingering = false;
      {
        std::lock_guard<std::mutex> lock(s->mu);
        if (s->announcement && !s->announced) announce = s->announcement;
        post_done = s->post_done && !s->done_posted;
        stopping = s->stopping;
        finishing = s->wait_peers_done;
        lingering = s->lingering;
      }
      if (announce) {
        store->set_once(kAbortKey, *announce);
        std::lock_guard<std::mutex> lock(s->mu);
        s->announced = true;
        s->cv.notify_all();
      }
      if (post_done) {
        store->add(done_key(o.rank), 1);
        std::lock_guard<std::mutex> lock(s->mu);
        s->done_posted = true;
        s->cv.notify_all();
      }
      if (stopping) break;
      heartbeat_round(*s, *store, lingering);
      std::unique_lock<std::mutex> lock(s->mu);
      s->cv.wait_for(lock, finishing || lingering ? kFinishPoll : o.beat, [&] {
        return s->stopping || (s->announcement && !s->announced) ||
               (s->post_done && !s->done_posted) || s->wait_peers_done != finishing ||
               s->lingering != lingering;
      });
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(s->mu);
    if (!s->store_error) s->store_error = first_line(e.what());
  }
  std::lock_guard<std::mutex> lock(s->mu);
  s->heartbeat_exited = true;
  s->cv.notify_all();
}

}  // namespace

DistWatchdog::DistWatchdog(WatchdogOptions options, Hooks hooks,
                           Clock::time_point rendezvous_deadline)
    : options_(std::move(options)),
      state_(std::make_shared<State>(options_)),
      abort_(std::move(hooks.abort)),
      stop_requested_(std::move(hooks.stop_requested)) {
  state_->deadline = rendezvous_deadline;
  state_->give_up = std::move(hooks.give_up);
  if (!stop_requested_) stop_requested_ = [] { return -1; };
  watchdog_ = std::thread([this] { watch(); });
}

DistWatchdog::~DistWatchdog() { stop(); }

void DistWatchdog::start_heartbeat(Connect connect) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->heartbeat_started || state_->stopping) return;
    state_->rendezvous_done = true;
    state_->heartbeat_started = true;
    state_->watched_since = Clock::now();
    std::fill(state_->moved.begin(), state_->moved.end(), state_->watched_since);
  }
  // Detached from the start: stop() waits a bounded time for it, and it owns its share of the state
  // (and its connection), so it may outlive this object when a store call holds it.
  std::thread([s = state_, connect = std::move(connect)] { heartbeat_loop(s, connect); }).detach();
}

void DistWatchdog::boundary() {
  state_->last_boundary.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
}

std::optional<DistVerdict> DistWatchdog::verdict() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->verdict;
}

std::optional<DistVerdict> DistWatchdog::wait_verdict(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait_for(lock, timeout, [&] { return state_->verdict.has_value(); });
  return state_->verdict;
}

void DistWatchdog::announce_failure(const std::string& reason) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->announcement) return;
  state_->announcement = std::to_string(options_.rank) + "|" + std::to_string(options_.rank) +
                         "|rank " + std::to_string(options_.rank) +
                         " failed: " + first_line(reason);
  state_->cv.notify_all();
}

void DistWatchdog::stand_down() {
  std::lock_guard<std::mutex> give_up(give_up_mu_);
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->stood_down = true;
  state_->cv.notify_all();
}

void DistWatchdog::finish(std::chrono::milliseconds timeout) {
  stand_down();
  std::unique_lock<std::mutex> lock(state_->mu);
  if (!state_->heartbeat_started) return;
  state_->post_done = true;
  state_->wait_peers_done = options_.store_rank == options_.rank && options_.world_size > 1;
  state_->cv.notify_all();
  state_->cv.wait_for(lock, timeout, [&] {
    return state_->heartbeat_exited ||
           (state_->done_posted &&
            (!state_->wait_peers_done || state_->peers_done_or_silent(Clock::now())));
  });
  state_->wait_peers_done = false;
}

void DistWatchdog::set_give_up(std::function<void(const DistVerdict&)> give_up) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->give_up = std::move(give_up);
}

void DistWatchdog::stop() {
  {
    std::unique_lock<std::mutex> lock(state_->mu);
    if (state_->stopping) return;
    // This rank announced its failure or abort and serves the store: the peers read the news only
    // while the store lives, so keep it up until each has acknowledged it (or is silent or done),
    // for at most a beat and a half (they read it once a beat).
    if (state_->announcement && options_.store_rank == options_.rank && state_->heartbeat_started &&
        !state_->heartbeat_exited) {
      state_->lingering = true;
      state_->cv.notify_all();
      state_->cv.wait_for(lock, options_.beat + options_.beat / 2, [&] {
        return state_->heartbeat_exited ||
               (state_->announced && state_->peers_done_or_silent(Clock::now(), true));
      });
    }
    state_->stopping = true;
    state_->cv.notify_all();
  }
  if (watchdog_.joinable()) watchdog_.join();
  // The heartbeat thread ends after its pending announcement; a store that does not answer holds
  // it in a blocking call, and then it stays behind, detached, with its own share of the state.
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait_for(lock, kHeartbeatJoin,
                      [&] { return !state_->heartbeat_started || state_->heartbeat_exited; });
}

std::optional<DistVerdict> DistWatchdog::decide(Clock::time_point now) {
  State& s = *state_;
  const WatchdogOptions& o = options_;
  const int signal = stop_requested_();
  if (!s.rendezvous_done) {
    if (signal >= 0) {
      return DistVerdict{DistVerdict::Kind::kStop, -1, signal,
                         signal_name(signal) + " during the rendezvous"};
    }
    if (now >= s.deadline) {
      return DistVerdict{DistVerdict::Kind::kDeadline, -1, -1,
                         "the rendezvous did not complete in time"};
    }
    return std::nullopt;
  }
  if (s.stood_down) return std::nullopt;
  if (s.heartbeat_started) {
    const std::string store =
        o.store_rank < 0
            ? "the store at " + o.store + " (torchrun's agent)"
            : (o.store_rank == o.rank ? "the store this rank serves at " + o.store
                                      : "rank " + std::to_string(o.store_rank) +
                                            " missing: the store it serves at " + o.store);
    const int store_rank = o.store_rank == o.rank ? -1 : o.store_rank;
    if (s.store_error) {
      return DistVerdict{DistVerdict::Kind::kPeerLost, store_rank, -1,
                         store + " is gone (" + *s.store_error + ")"};
    }
    const Clock::duration silent = now - s.last_answer.value_or(s.watched_since);
    if (silent > o.peer_timeout) {
      return DistVerdict{DistVerdict::Kind::kPeerLost, store_rank, -1,
                         store + " has not answered for " + seconds(silent)};
    }
    if (s.peer_abort) return s.peer_abort;
    for (int p = 0; p < o.world_size; ++p) {
      const auto i = static_cast<std::size_t>(p);
      if (p == o.rank || s.done[i] || now - s.moved[i] <= o.peer_timeout) continue;
      return DistVerdict{
          DistVerdict::Kind::kPeerLost, p, -1,
          "rank " + std::to_string(p) + " missing: no heartbeat for " + seconds(now - s.moved[i]) +
              (s.seen[i] == 0 ? " (none since the rendezvous)" : "") + " (--dist-peer-timeout-s)"};
    }
  }
  if (signal < 0) return std::nullopt;
  if (!s.stop_seen) s.stop_seen = now;
  const Clock::time_point boundary{Clock::duration(s.last_boundary.load())};
  const Clock::duration waited = now - std::max(*s.stop_seen, boundary);
  if (waited <= o.stop_grace) return std::nullopt;
  std::string reason = signal_name(signal) + ": no step boundary for " + seconds(waited) +
                       " since the request, so the ranks cannot agree on a stop (this rank waits "
                       "in a collective or a step); stopping alone";
  for (int p = 0; p < o.world_size; ++p) {
    const auto i = static_cast<std::size_t>(p);
    if (p != o.rank && now - s.moved[i] > 2 * o.beat) {
      reason += "; rank " + std::to_string(p) + "'s heartbeat stopped " +
                seconds(now - s.moved[i]) + " ago";
    }
  }
  return DistVerdict{DistVerdict::Kind::kStop, -1, signal, reason};
}

void DistWatchdog::act(const DistVerdict& verdict) {
  {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->verdict = verdict;
    if (verdict.kind != DistVerdict::Kind::kDeadline && !state_->announcement) {
      const int lost = verdict.kind == DistVerdict::Kind::kStop ? options_.rank : verdict.rank;
      const std::string reason =
          verdict.kind == DistVerdict::Kind::kStop
              ? "rank " + std::to_string(options_.rank) + " stopped: " + verdict.reason
              : verdict.reason;
      // A verdict that came from another rank's announcement is not announced again.
      if (!(state_->peer_abort && state_->peer_abort->reason == verdict.reason)) {
        state_->announcement =
            std::to_string(options_.rank) + "|" + std::to_string(lost) + "|" + reason;
      }
    }
    state_->cv.notify_all();
    // The abort closes the heartbeat's connection too: give the announcement a moment first.
    state_->cv.wait_for(lock, kAnnounceWait, [&] {
      return !state_->announcement || state_->announced || !state_->heartbeat_started ||
             state_->heartbeat_exited;
    });
  }
  if (abort_) abort_(verdict);
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->aborted_at = Clock::now();
  state_->cv.notify_all();
}

void DistWatchdog::watch() {
  data_pipeline::nvtx::name_current_thread("ddp/watchdog");
  std::unique_lock<std::mutex> lock(state_->mu);
  while (!state_->stopping) {
    const Clock::time_point now = Clock::now();
    if (!state_->verdict) {
      if (const std::optional<DistVerdict> v = decide(now)) {
        lock.unlock();
        act(*v);
        lock.lock();
        continue;
      }
    } else if (state_->aborted_at && !state_->stood_down && !state_->gave_up &&
               now - *state_->aborted_at > options_.unwind_grace) {
      // The trainer's thread did not come back: a wait the abort could not end. Give up, unless
      // it comes back meanwhile (stand_down() takes give_up_mu_ first).
      const DistVerdict v = *state_->verdict;
      lock.unlock();
      {
        std::lock_guard<std::mutex> give_up(give_up_mu_);
        std::function<void(const DistVerdict&)> hook;
        {
          std::lock_guard<std::mutex> state_lock(state_->mu);
          if (!state_->stood_down) {
            state_->gave_up = true;
            hook = state_->give_up;
          }
        }
        if (hook) hook(v);
      }
      lock.lock();
      continue;
    }
    state_->cv.wait_for(lock, kTick, [&] { return state_->stopping; });
  }
}

}  // namespace workload
