// Liveness of a data-parallel run's ranks: a heartbeat through the rendezvous store from a thread
// of its own, and a watchdog that aborts the process group when a peer or the store is missing,
// when a stop request cannot wait for the ranks' agreement, or when the rendezvous outlives its
// deadline.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace workload {

/// The store operations the heartbeat needs, on a connection of its own (a c10d::TCPStore client
/// under the run's prefix, lib/distributed/detail/c10d_store.h; an in-memory fake in tests). Used
/// by the heartbeat thread only. An operation may block for as long as the store does not answer
/// (the watchdog notices) and throws when the store is gone.
class HeartbeatStore {
 public:
  virtual ~HeartbeatStore() = default;
  /// Adds `delta` to the counter `key` (created at 0) and returns its new value; delta 0 reads it.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  /// Sets `key` to `value` unless it holds a value already (the first writer wins).
  virtual void set_once(const std::string& key, const std::string& value) = 0;
  /// The value of `key`, or nullopt when it is not set. Does not wait for it.
  virtual std::optional<std::string> get_if_set(const std::string& key) = 0;
};

/// What the watchdog decided. It decides once: the first verdict stands.
struct DistVerdict {
  enum class Kind {
    kPeerLost,  ///< a peer (or the store) is missing, or announced its failure
    kStop,      ///< a stop request the ranks could not honour together in time
    kDeadline,  ///< the rendezvous did not complete in time
  };
  Kind kind = Kind::kPeerLost;
  int rank = -1;       ///< kPeerLost: the missing or failed rank (-1: torchrun's agent's store)
  int signal = -1;     ///< kStop: the signal asked for
  std::string reason;  ///< one line, e.g. "rank 1 missing: no heartbeat for 5.0 s"
  /// Reached before the run started (kStop, kDeadline): nothing of the run is there to save.
  bool in_rendezvous = false;
  /// Read from another rank's announcement (not announced again).
  bool from_peer = false;
};

/// The exit status of a process that ends on `verdict` (lib/core/exit_status.h): 128 + the signal
/// when a stop was requested (`requested_signal` >= 0) or the verdict is a stop, 3 for a lost peer,
/// 2 for a rendezvous that did not complete (the environment's fault).
int exit_status_of(const DistVerdict& verdict, int requested_signal = -1);

/// The last resort of a rank whose trainer's thread cannot be waited for: one line on stderr,
/// written directly (no stream lock can hold it), "<program> (rank <r>): <what>" with the verdict's
/// reason and `extra` appended, then the process's exit with exit_status_of(verdict,
/// requested_signal), without destructors (the trainer's thread may be stuck in one of them). For
/// a stop during the rendezvous the line says the run stopped before it started; otherwise that the
/// thread did not come back after the abort. Any thread; never returns.
[[noreturn]] void end_process_on_verdict(const DistVerdict& verdict, int rank, int requested_signal,
                                         const std::string& extra = {});

/// What a rank announces to the others under the store's `abort` key when it aborts or fails:
/// who announces, the rank lost (itself for its own failure or stop), and the reason, as one line.
struct Announcement {
  int author = -1;
  int lost = -1;
  std::string reason;
};
/// The announcement as the store holds it ("<author>|<lost>|<reason>"), and back (nullopt for a
/// value that is not one). The one encoder and decoder of the message.
std::string encode(const Announcement& announcement);
std::optional<Announcement> decode_announcement(const std::string& text);

/// The settings of the watchdog and heartbeat (lib/distributed/distributed.cpp fills them from the
/// flags).
struct WatchdogOptions {
  int rank = 0;
  int world_size = 1;
  /// Between two heartbeats of this rank (and two reads of the peers' heartbeats).
  std::chrono::milliseconds beat{1000};
  /// A peer whose heartbeat has not moved for this long, or a store that has not answered for this
  /// long, is missing (--dist-peer-timeout-s).
  std::chrono::milliseconds peer_timeout{5000};
  /// A stop request aborts the process group when the trainer's thread has passed no step boundary
  /// for this long since the request (the ranks' agreement needs every rank at a boundary).
  std::chrono::milliseconds stop_grace{2500};
  /// After an abort, how long the trainer's thread has to come back (stand_down()) before the
  /// give-up hook ends the process.
  std::chrono::milliseconds unwind_grace{2000};
  /// A rendezvous still under way this long after it started says what it waits for (the
  /// `waiting` hook), and again every six times as long.
  std::chrono::milliseconds waiting_notice{5000};
  /// The rank that serves the store (its loss is that rank's), or -1 for torchrun's agent.
  int store_rank = 0;
  /// The store's address for messages ("127.0.0.1:29500").
  std::string store;
};

/// Watches a rank's peers, its store, its stop request and its rendezvous, and aborts the process
/// group when one of them cannot be waited for any longer.
///
/// Two threads, started by the constructor and start_heartbeat(), named `ddp/watchdog` and
/// `ddp/heartbeat` for the OS and NVTX (neither opens an NVTX range). The heartbeat thread owns a
/// store connection of its own (the trainer's may be blocked): every `beat` it adds 1 to
/// `hb/<rank>`, reads every peer's counter and `done/<peer>` flag and the `abort` key (and
/// acknowledges another rank's announcement in `ack/<rank>`), and records when each counter last
/// moved and when the store last answered (2 W store operations a second per rank for W ranks).
/// The watchdog thread only reads those facts, so a store that never answers cannot hold it: every
/// 100 ms it decides, in this order,
///   - before start_heartbeat(): a stop request (kStop) or the deadline (kDeadline);
///   - the store failed (kPeerLost: the store's rank), has not answered for `peer_timeout`
///     (kPeerLost: the store's rank), a peer announced its failure in `abort` (kPeerLost: that
///     rank), a peer's counter has not moved for `peer_timeout` (kPeerLost: that rank);
///   - a stop request with no step boundary (boundary()) for `stop_grace` since it (kStop).
/// Liveness is not progress: a rank in a long step or collective still beats, so only a dead or
/// frozen process (or one whose store is gone) is missing, whatever the collectives' timeout.
/// On a verdict it calls the abort hook once (on its own thread), announces the verdict to the
/// others under `abort`, and wakes wait_verdict(). If the trainer's thread does not call
/// stand_down() within `unwind_grace` of the abort, it calls the give-up hook (in production: the
/// last-resort report and the process's exit). A stop request during the rendezvous has nothing to
/// unwind: the give-up hook runs at once, without an abort.
///
/// Its states (WatchState) and what moves it between them (kTransitions in the .cpp):
///   kRendezvous --start_heartbeat--> kWatching
///   kRendezvous, kWatching --verdict--> kAborted --unwind_grace passes--> kGaveUp
///   kRendezvous --stop request (verdict)--> kAborted --at once--> kGaveUp
///   kRendezvous, kWatching, kAborted --stand_down()--> kStoodDown
///   any --stop()--> kStopped
/// The verdict rules of each state are a table too (kRules): the first that holds decides.
///
/// Thread-safety: every public member may be called from any thread; the hooks must be too.
class DistWatchdog {
 public:
  struct Hooks {
    /// Ends every wait of the process group and the store (may block briefly; called once).
    std::function<void(const DistVerdict&)> abort;
    /// The trainer's thread did not come back after the abort (in production it does not return).
    /// Replaceable with set_give_up().
    std::function<void(const DistVerdict&)> give_up;
    /// The process's stop request: its signal, or -1 when none.
    std::function<int()> stop_requested;
    /// The rendezvous has been under way for `waited` (waiting_notice, then every six times as
    /// long): says what it waits for. May be empty.
    std::function<void(std::chrono::steady_clock::duration waited)> waiting;
  };
  /// Opens a store connection for the heartbeat; called on the heartbeat thread.
  using Connect = std::function<std::unique_ptr<HeartbeatStore>()>;

  /// Starts the watchdog thread, watching the rendezvous until `rendezvous_deadline`.
  DistWatchdog(WatchdogOptions options, Hooks hooks,
               std::chrono::steady_clock::time_point rendezvous_deadline);
  /// stop().
  ~DistWatchdog();
  DistWatchdog(const DistWatchdog&) = delete;
  DistWatchdog& operator=(const DistWatchdog&) = delete;

  /// The rendezvous is complete: starts the heartbeat thread, which connects through `connect`,
  /// and watches the peers from now on (a peer that never beats is missing after `peer_timeout`).
  void start_heartbeat(Connect connect);
  /// The trainer's thread reached a step boundary (a stop request is making progress). Lock-free.
  void boundary();
  /// The verdict, once there is one.
  std::optional<DistVerdict> verdict() const;
  /// Waits up to `timeout` for a verdict (e.g. after a collective failed: was it a lost peer?).
  std::optional<DistVerdict> wait_verdict(std::chrono::milliseconds timeout) const;
  /// This rank fails for `reason` (its own error): the others read "rank <r> failed: <reason>" at
  /// their next heartbeat, rather than waiting `peer_timeout` for its silence. Best effort.
  void announce_failure(const std::string& reason);
  /// The trainer's thread is back from the run (after a verdict, or at its end): no verdict or
  /// give-up follows. Beats go on until stop(), so the others do not miss this rank while it ends.
  /// Waits for a give-up already under way (which ends the process).
  void stand_down();
  /// The run ended cleanly on this rank: stand_down(), tell the others this rank is done, and when
  /// this rank serves the store, wait up to `timeout` until every peer is done (or silent for
  /// `peer_timeout`), so that none loses its store while it ends. Returns at once without a
  /// heartbeat.
  void finish(std::chrono::milliseconds timeout);
  /// Replaces the give-up hook (the trainer's writes the last-resort report).
  void set_give_up(std::function<void(const DistVerdict&)> give_up);
  /// Ends both threads: the watchdog's at once; the heartbeat's after its pending announcement, or
  /// left behind (detached, owning what it uses) when a store operation holds it for more than a
  /// second. A rank that serves the store and announced its failure or abort first keeps the
  /// store up until every peer has acknowledged the announcement (`ack/<rank>`), for at most a
  /// beat and a half. Idempotent.
  void stop();

  const WatchdogOptions& options() const { return options_; }

  /// Where the watchdog is (see the class comment).
  enum class WatchState { kRendezvous, kWatching, kAborted, kStoodDown, kGaveUp, kStopped };
  WatchState state() const;

  /// Internal: the facts and requests both threads share (lib/distributed/watchdog.cpp).
  struct State;

 private:
  void watch();
  void act(const DistVerdict& verdict);
  void give_up(const DistVerdict& verdict);

  const WatchdogOptions options_;
  const std::shared_ptr<State> state_;  // shared with the heartbeat thread, which may outlive this
  std::mutex give_up_mu_;               // held while giving up; stand_down() waits for it
  std::function<void(const DistVerdict&)> abort_;
  std::function<int()> stop_requested_;
  std::function<void(std::chrono::steady_clock::duration)> waiting_;
  std::thread watchdog_;
};

}  // namespace workload
