// The heartbeat and the watchdog of a data-parallel rank (lib/distributed/watchdog.h).
#include "lib/distributed/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "data_pipeline/nvtx_domain.h"
#include "lib/core/exit_status.h"
#include "lib/core/stop_request.h"

namespace workload {

namespace {

using Clock = std::chrono::steady_clock;
using WatchState = DistWatchdog::WatchState;

// The watchdog's period: how late after the fact a verdict can come.
constexpr std::chrono::milliseconds kTick{100};
// How long a verdict waits for the heartbeat thread to announce it before aborting (the abort
// closes that thread's connection too).
constexpr std::chrono::milliseconds kAnnounceWait{300};
// How long stop() waits for the heartbeat thread before leaving it behind.
constexpr std::chrono::milliseconds kHeartbeatJoin{1000};
// The heartbeat's period while the store's owner waits for the others to finish or to read its
// news.
constexpr std::chrono::milliseconds kFinishPoll{50};

// Store keys, under the run's prefix: each rank's heartbeat counter, its "done" flag, the
// announcement of the first rank that aborts or fails (an Announcement), and each rank's
// acknowledgement of another's announcement.
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

// What moves the watchdog from one state to another.
enum class WatchEvent { kRendezvousDone, kVerdict, kStandDown, kGiveUp, kStop };

struct Transition {
  WatchState from;
  WatchEvent event;
  WatchState to;
};

// Every move the watchdog makes; an event not listed for the current state changes nothing.
constexpr Transition kTransitions[] = {
    {WatchState::kRendezvous, WatchEvent::kRendezvousDone, WatchState::kWatching},
    {WatchState::kRendezvous, WatchEvent::kVerdict, WatchState::kAborted},
    {WatchState::kWatching, WatchEvent::kVerdict, WatchState::kAborted},
    {WatchState::kRendezvous, WatchEvent::kStandDown, WatchState::kStoodDown},
    {WatchState::kWatching, WatchEvent::kStandDown, WatchState::kStoodDown},
    {WatchState::kAborted, WatchEvent::kStandDown, WatchState::kStoodDown},
    {WatchState::kAborted, WatchEvent::kGiveUp, WatchState::kGaveUp},
    {WatchState::kRendezvous, WatchEvent::kStop, WatchState::kStopped},
    {WatchState::kWatching, WatchEvent::kStop, WatchState::kStopped},
    {WatchState::kAborted, WatchEvent::kStop, WatchState::kStopped},
    {WatchState::kStoodDown, WatchEvent::kStop, WatchState::kStopped},
    {WatchState::kGaveUp, WatchEvent::kStop, WatchState::kStopped},
};

// A message for the heartbeat thread to write to the store: none asked, asked, written.
enum class Post { kNone, kPending, kPosted };

// How the heartbeat thread beats: once a beat; fast while the store's rank waits for the others to
// be done (finish()); fast and reading the peers' acknowledgements while it keeps the store up for
// them to read its announcement (stop()).
enum class BeatMode { kBeat, kFinishing, kLingering };

// The heartbeat thread: not started, beating, exited (its store failed, or stop()).
enum class Heartbeat { kNotStarted, kRunning, kExited };

}  // namespace

int exit_status_of(const DistVerdict& verdict, int requested_signal) {
  if (requested_signal >= 0) return exit_status(Ending::kStopped, requested_signal);
  switch (verdict.kind) {
    case DistVerdict::Kind::kPeerLost:
      return exit_status(Ending::kPeerLost);
    case DistVerdict::Kind::kStop:
      return exit_status(Ending::kStopped, verdict.signal);
    case DistVerdict::Kind::kDeadline:
      return exit_status(Ending::kUsage);
  }
  return exit_status(Ending::kFailed);
}

void end_process_on_verdict(const DistVerdict& verdict, int rank, int requested_signal,
                            const std::string& extra) {
  const bool before_run = verdict.in_rendezvous && verdict.kind == DistVerdict::Kind::kStop;
  const std::string line =
      std::string(program_invocation_short_name) + " (rank " + std::to_string(rank) + "): " +
      (before_run ? verdict.reason + ": stopped before the run"
                  : "error: " + verdict.reason +
                        "; the trainer's thread did not come back after the abort") +
      extra + "\n";
  const ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
  static_cast<void>(written);
  std::_Exit(exit_status_of(verdict, requested_signal));
}

std::string encode(const Announcement& a) {
  return std::to_string(a.author) + "|" + std::to_string(a.lost) + "|" + first_line(a.reason);
}

std::optional<Announcement> decode_announcement(const std::string& text) {
  const std::size_t a = text.find('|');
  const std::size_t b = a == std::string::npos ? a : text.find('|', a + 1);
  if (b == std::string::npos) return std::nullopt;
  char* end = nullptr;
  Announcement out;
  out.author = static_cast<int>(std::strtol(text.c_str(), &end, 10));
  if (end != text.c_str() + a) return std::nullopt;
  out.lost = static_cast<int>(std::strtol(text.c_str() + a + 1, &end, 10));
  if (end != text.c_str() + b) return std::nullopt;
  out.reason = text.substr(b + 1);
  return out;
}

struct DistWatchdog::State {
  explicit State(const WatchdogOptions& o)
      : options(o),
        seen(static_cast<std::size_t>(o.world_size), 0),
        moved(static_cast<std::size_t>(o.world_size)),
        done(static_cast<std::size_t>(o.world_size), false),
        acked(static_cast<std::size_t>(o.world_size), false) {}

  // Applies `event` per kTransitions; false when it does not apply in the current state.
  bool move(WatchEvent event) {
    for (const Transition& t : kTransitions) {
      if (t.from == state && t.event == event) {
        state = t.to;
        cv.notify_all();
        return true;
      }
    }
    return false;
  }

  // Every peer is done (or acknowledged this rank's announcement, with `acks`) or silent.
  bool peers_done_or_silent(Clock::time_point now, bool acks = false) const {
    for (int p = 0; p < options.world_size; ++p) {
      const auto i = static_cast<std::size_t>(p);
      if (p == options.rank || done[i] || (acks && acked[i])) continue;
      if (now - moved[i] <= options.peer_timeout) return false;
    }
    return true;
  }

  const WatchdogOptions options;
  mutable std::mutex mu;
  mutable std::condition_variable cv;  // any change below; the threads and waiters re-check

  // The owner's side.
  WatchState state = WatchState::kRendezvous;
  Clock::time_point deadline;
  std::optional<DistVerdict> verdict;
  Clock::time_point aborted_at;                // kAborted: when the abort hook returned
  bool abort_done = false;                     // ... and whether it has
  std::optional<Clock::time_point> stop_seen;  // when the watchdog first saw the stop request
  std::atomic<Clock::rep> last_boundary{0};    // boundary(), lock-free
  std::function<void(const DistVerdict&)> give_up;

  // Requests to the heartbeat thread.
  std::string announcement;  // encode(Announcement), with announcement_post
  Post announcement_post = Post::kNone;
  Post done_post = Post::kNone;
  BeatMode mode = BeatMode::kBeat;

  // The heartbeat thread's facts.
  Heartbeat heartbeat = Heartbeat::kNotStarted;
  Clock::time_point watched_since;
  std::optional<Clock::time_point> last_answer;  // the last complete round
  std::vector<std::int64_t> seen;                // each peer's counter as last read
  std::vector<Clock::time_point> moved;          // when it last moved
  std::vector<bool> done;                        // the peer finished cleanly
  std::vector<bool> acked;                       // the peer read this rank's announcement
  std::optional<std::string> store_error;
  std::optional<DistVerdict> peer_abort;  // another rank's announcement
  bool ack_sent = false;                  // ... which this rank acknowledged
};

namespace {

using State = DistWatchdog::State;

// ---------------------------------------------------------------------------------------------
// The verdict rules: in its state, each says whether its condition holds now.

struct Now {
  Clock::time_point time;
  int signal = -1;  // the stop request's, -1 for none
};

DistVerdict verdict(DistVerdict::Kind kind, int rank, int signal, std::string reason) {
  DistVerdict v;
  v.kind = kind;
  v.rank = rank;
  v.signal = signal;
  v.reason = std::move(reason);
  return v;
}

std::string where(const WatchdogOptions& o) {
  return "rank " + std::to_string(o.rank) + " of " + std::to_string(o.world_size) + ", store " +
         o.store;
}

std::optional<DistVerdict> stop_during_rendezvous(const State& s, const Now& now) {
  if (now.signal < 0) return std::nullopt;
  DistVerdict v =
      verdict(DistVerdict::Kind::kStop, -1, now.signal,
              signal_name(now.signal) + " during the rendezvous (" + where(s.options) + ")");
  v.in_rendezvous = true;
  return v;
}

std::optional<DistVerdict> rendezvous_deadline(const State& s, const Now& now) {
  if (now.time < s.deadline) return std::nullopt;
  DistVerdict v = verdict(DistVerdict::Kind::kDeadline, -1, -1,
                          "the rendezvous did not complete in time (" + where(s.options) + ")");
  v.in_rendezvous = true;
  return v;
}

// The store's loss is its rank's (this rank's own store: no one else to blame; torchrun's agent:
// rank -1).
std::string store_name(const WatchdogOptions& o) {
  if (o.store_rank < 0) return "the store at " + o.store + " (torchrun's agent)";
  if (o.store_rank == o.rank) return "the store this rank serves at " + o.store;
  return "rank " + std::to_string(o.store_rank) + " missing: the store it serves at " + o.store;
}
int store_owner(const WatchdogOptions& o) { return o.store_rank == o.rank ? -1 : o.store_rank; }

std::optional<DistVerdict> store_failed(const State& s, const Now&) {
  if (!s.store_error) return std::nullopt;
  return verdict(DistVerdict::Kind::kPeerLost, store_owner(s.options), -1,
                 store_name(s.options) + " is gone (" + *s.store_error + ")");
}

std::optional<DistVerdict> store_silent(const State& s, const Now& now) {
  const Clock::duration silent = now.time - s.last_answer.value_or(s.watched_since);
  if (silent <= s.options.peer_timeout) return std::nullopt;
  return verdict(DistVerdict::Kind::kPeerLost, store_owner(s.options), -1,
                 store_name(s.options) + " has not answered for " + seconds(silent));
}

std::optional<DistVerdict> peer_announced(const State& s, const Now&) { return s.peer_abort; }

std::optional<DistVerdict> peer_silent(const State& s, const Now& now) {
  const WatchdogOptions& o = s.options;
  for (int p = 0; p < o.world_size; ++p) {
    const auto i = static_cast<std::size_t>(p);
    if (p == o.rank || s.done[i] || now.time - s.moved[i] <= o.peer_timeout) continue;
    return verdict(DistVerdict::Kind::kPeerLost, p, -1,
                   "rank " + std::to_string(p) + " missing: no heartbeat for " +
                       seconds(now.time - s.moved[i]) +
                       (s.seen[i] == 0 ? " (none since the rendezvous)" : "") +
                       " (--dist-peer-timeout-s)");
  }
  return std::nullopt;
}

// A stop request the ranks cannot agree on: no step boundary for stop_grace since it (this rank
// waits in a collective or a long step).
std::optional<DistVerdict> stop_without_boundary(const State& s, const Now& now) {
  if (now.signal < 0 || !s.stop_seen) return std::nullopt;
  const WatchdogOptions& o = s.options;
  const Clock::time_point boundary{Clock::duration(s.last_boundary.load())};
  const Clock::duration waited = now.time - std::max(*s.stop_seen, boundary);
  if (waited <= o.stop_grace) return std::nullopt;
  std::string reason = signal_name(now.signal) + ": no step boundary for " + seconds(waited) +
                       " since the request, so the ranks cannot agree on a stop (this rank waits "
                       "in a collective or a step); stopping alone";
  for (int p = 0; p < o.world_size; ++p) {
    const auto i = static_cast<std::size_t>(p);
    if (p != o.rank && now.time - s.moved[i] > 2 * o.beat) {
      reason += "; rank " + std::to_string(p) + "'s heartbeat stopped " +
                seconds(now.time - s.moved[i]) + " ago";
    }
  }
  return verdict(DistVerdict::Kind::kStop, -1, now.signal, reason);
}

struct Rule {
  WatchState state;
  std::optional<DistVerdict> (*holds)(const State&, const Now&);
};

// In each state, in this order: the first rule that holds is the verdict.
constexpr Rule kRules[] = {
    {WatchState::kRendezvous, &stop_during_rendezvous},
    {WatchState::kRendezvous, &rendezvous_deadline},
    {WatchState::kWatching, &store_failed},
    {WatchState::kWatching, &store_silent},
    {WatchState::kWatching, &peer_announced},
    {WatchState::kWatching, &peer_silent},
    {WatchState::kWatching, &stop_without_boundary},
};

std::optional<DistVerdict> decide(State& s, const Now& now) {
  if (now.signal >= 0 && !s.stop_seen) s.stop_seen = now.time;
  for (const Rule& rule : kRules) {
    if (rule.state != s.state) continue;
    if (std::optional<DistVerdict> v = rule.holds(s, now)) return v;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// The heartbeat thread.

// Another rank's announcement as this rank's verdict (nullopt for this rank's own).
std::optional<DistVerdict> peer_verdict(const std::string& value, int self) {
  const std::optional<Announcement> a = decode_announcement(value);
  if (!a || a->author == self) return std::nullopt;
  DistVerdict v = verdict(DistVerdict::Kind::kPeerLost, a->lost, -1, a->reason);
  if (a->lost != a->author) v.reason += " (seen by rank " + std::to_string(a->author) + ")";
  v.from_peer = true;
  return v;
}

// One round of the heartbeat: beat, read the peers' counters and done flags (and, lingering, their
// acknowledgements) and the announcement, acknowledge another's, then record what was read.
void heartbeat_round(State& s, HeartbeatStore& store, bool lingering) {
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
  const std::optional<DistVerdict> news = abort ? peer_verdict(*abort, o.rank) : std::nullopt;
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

// Writes what the owner asked for (the announcement, the done flag); false once stop() came.
bool post_requests(State& s, HeartbeatStore& store) {
  std::string announce;
  bool post_done = false;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.announcement_post == Post::kPending) announce = s.announcement;
    post_done = s.done_post == Post::kPending;
  }
  if (!announce.empty()) {
    store.set_once(kAbortKey, announce);
    std::lock_guard<std::mutex> lock(s.mu);
    s.announcement_post = Post::kPosted;
    s.cv.notify_all();
  }
  if (post_done) {
    store.add(done_key(s.options.rank), 1);
    std::lock_guard<std::mutex> lock(s.mu);
    s.done_post = Post::kPosted;
    s.cv.notify_all();
  }
  std::lock_guard<std::mutex> lock(s.mu);
  return s.state != WatchState::kStopped;
}

void heartbeat_loop(const std::shared_ptr<State>& s, const DistWatchdog::Connect& connect) {
  data_pipeline::nvtx::name_current_thread("ddp/heartbeat");
  try {
    const std::unique_ptr<HeartbeatStore> store = connect();
    while (post_requests(*s, *store)) {
      BeatMode mode;
      {
        std::lock_guard<std::mutex> lock(s->mu);
        mode = s->mode;
      }
      heartbeat_round(*s, *store, mode == BeatMode::kLingering);
      std::unique_lock<std::mutex> lock(s->mu);
      s->cv.wait_for(lock, mode == BeatMode::kBeat ? s->options.beat : kFinishPoll, [&] {
        return s->state == WatchState::kStopped || s->announcement_post == Post::kPending ||
               s->done_post == Post::kPending || s->mode != mode;
      });
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(s->mu);
    if (!s->store_error) s->store_error = first_line(e.what());
  }
  std::lock_guard<std::mutex> lock(s->mu);
  s->heartbeat = Heartbeat::kExited;
  s->cv.notify_all();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// DistWatchdog

DistWatchdog::DistWatchdog(WatchdogOptions options, Hooks hooks,
                           Clock::time_point rendezvous_deadline)
    : options_(std::move(options)),
      state_(std::make_shared<State>(options_)),
      abort_(std::move(hooks.abort)),
      stop_requested_(std::move(hooks.stop_requested)),
      waiting_(std::move(hooks.waiting)) {
  state_->deadline = rendezvous_deadline;
  state_->give_up = std::move(hooks.give_up);
  if (!stop_requested_) stop_requested_ = [] { return -1; };
  watchdog_ = std::thread([this] { watch(); });
}

DistWatchdog::~DistWatchdog() { stop(); }

DistWatchdog::WatchState DistWatchdog::state() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->state;
}

void DistWatchdog::start_heartbeat(Connect connect) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->move(WatchEvent::kRendezvousDone)) return;
    state_->heartbeat = Heartbeat::kRunning;
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
  if (state_->announcement_post != Post::kNone) return;
  state_->announcement = encode({options_.rank, options_.rank,
                                 "rank " + std::to_string(options_.rank) + " failed: " + reason});
  state_->announcement_post = Post::kPending;
  state_->cv.notify_all();
}

void DistWatchdog::stand_down() {
  std::lock_guard<std::mutex> give_up(give_up_mu_);
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->move(WatchEvent::kStandDown);
}

void DistWatchdog::finish(std::chrono::milliseconds timeout) {
  stand_down();
  std::unique_lock<std::mutex> lock(state_->mu);
  if (state_->heartbeat == Heartbeat::kNotStarted) return;
  state_->done_post = Post::kPending;
  const bool wait_peers = options_.store_rank == options_.rank && options_.world_size > 1;
  if (wait_peers) state_->mode = BeatMode::kFinishing;
  state_->cv.notify_all();
  state_->cv.wait_for(lock, timeout, [&] {
    return state_->heartbeat == Heartbeat::kExited ||
           (state_->done_post == Post::kPosted &&
            (!wait_peers || state_->peers_done_or_silent(Clock::now())));
  });
  state_->mode = BeatMode::kBeat;
}

void DistWatchdog::set_give_up(std::function<void(const DistVerdict&)> give_up) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->give_up = std::move(give_up);
}

void DistWatchdog::stop() {
  {
    std::unique_lock<std::mutex> lock(state_->mu);
    if (state_->state == WatchState::kStopped) return;
    // This rank announced its failure or abort and serves the store: the peers read the news only
    // while the store lives, so keep it up until each has acknowledged it (or is silent or done),
    // for at most a beat and a half (they read it once a beat).
    if (state_->announcement_post != Post::kNone && options_.store_rank == options_.rank &&
        state_->heartbeat == Heartbeat::kRunning) {
      state_->mode = BeatMode::kLingering;
      state_->cv.notify_all();
      state_->cv.wait_for(lock, options_.beat + options_.beat / 2, [&] {
        return state_->heartbeat == Heartbeat::kExited ||
               (state_->announcement_post == Post::kPosted &&
                state_->peers_done_or_silent(Clock::now(), true));
      });
    }
    state_->move(WatchEvent::kStop);
  }
  if (watchdog_.joinable()) watchdog_.join();
  // The heartbeat thread ends after its pending announcement; a store that does not answer holds
  // it in a blocking call, and then it stays behind, detached, with its own share of the state.
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait_for(lock, kHeartbeatJoin,
                      [&] { return state_->heartbeat != Heartbeat::kRunning; });
}

void DistWatchdog::act(const DistVerdict& v) {
  {
    std::unique_lock<std::mutex> lock(state_->mu);
    const bool before_run = state_->state == WatchState::kRendezvous;
    state_->verdict = v;
    state_->move(WatchEvent::kVerdict);
    if (before_run && v.kind == DistVerdict::Kind::kStop) {
      lock.unlock();
      give_up(v);  // nothing started that an abort could end or a report could keep
      return;
    }
    if (v.kind != DistVerdict::Kind::kDeadline && !v.from_peer &&
        state_->announcement_post == Post::kNone) {
      const bool stop = v.kind == DistVerdict::Kind::kStop;
      state_->announcement = encode(
          {options_.rank, stop ? options_.rank : v.rank,
           stop ? "rank " + std::to_string(options_.rank) + " stopped: " + v.reason : v.reason});
      state_->announcement_post = Post::kPending;
    }
    state_->cv.notify_all();
    // The abort closes the heartbeat's connection too: give the announcement a moment first.
    state_->cv.wait_for(lock, kAnnounceWait, [&] {
      return state_->announcement_post != Post::kPending ||
             state_->heartbeat != Heartbeat::kRunning;
    });
  }
  if (abort_) abort_(v);
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->aborted_at = Clock::now();
  state_->abort_done = true;
  state_->cv.notify_all();
}

void DistWatchdog::give_up(const DistVerdict& v) {
  // Unless the trainer's thread comes back meanwhile (stand_down() takes give_up_mu_ first).
  std::lock_guard<std::mutex> give_up(give_up_mu_);
  std::function<void(const DistVerdict&)> hook;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->move(WatchEvent::kGiveUp)) hook = state_->give_up;
  }
  if (hook) hook(v);
}

void DistWatchdog::watch() {
  data_pipeline::nvtx::name_current_thread("ddp/watchdog");
  const Clock::time_point started = Clock::now();
  Clock::duration next_notice = options_.waiting_notice;
  std::unique_lock<std::mutex> lock(state_->mu);
  while (state_->state != WatchState::kStopped) {
    const Clock::time_point now = Clock::now();
    const WatchState at = state_->state;
    if (at == WatchState::kRendezvous && waiting_ && now - started >= next_notice) {
      next_notice += 6 * options_.waiting_notice;
      lock.unlock();
      waiting_(now - started);
      lock.lock();
      continue;
    }
    if (at == WatchState::kRendezvous || at == WatchState::kWatching) {
      if (std::optional<DistVerdict> v = decide(*state_, {now, stop_requested_()})) {
        lock.unlock();
        act(*v);
        lock.lock();
        continue;
      }
    } else if (at == WatchState::kAborted && state_->abort_done &&
               now - state_->aborted_at > options_.unwind_grace) {
      // The trainer's thread did not come back: a wait the abort could not end.
      const DistVerdict v = *state_->verdict;
      lock.unlock();
      give_up(v);
      lock.lock();
      continue;
    }
    state_->cv.wait_for(lock, kTick, [&] { return state_->state == WatchState::kStopped; });
  }
}

}  // namespace workload
