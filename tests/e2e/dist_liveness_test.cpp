// End-to-end tests of train_resnet50's ranks (CPU, Gloo, two ranks on 127.0.0.1) when a peer dies,
// freezes, stalls or is signalled, and when the rendezvous cannot complete: every rank ends in the
// time promised, names what it lost, writes its report and says so on its first stderr line.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "lib/core/build_features.h"
#include "lib/core/unique_fd.h"
#include "lib/distributed/launch_env.h"
#include "tests/support/test_util.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// A TCP socket listening on 127.0.0.1 that accepts connections (the kernel completes them) and
// never answers: a stale listener on the store's port. Port 0 asks for a free one.
class SilentListener {
 public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(fd_, 16) != 0) {
      throw std::runtime_error("cannot listen on 127.0.0.1");
    }
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { ::close(fd_); }
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;
  int port() const { return port_; }
  // Waits up to `timeout_s` for a connection the kernel completed (left unaccepted, unanswered):
  // the client is then in its rendezvous, whatever its start-up took.
  bool wait_for_connection(double timeout_s) const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(timeout_s * 1000)) == 1;
  }
  // Closes the connections completed so far (a client that has ended), so that
  // wait_for_connection() waits for the next one.
  void drop_connections() {
    while (wait_for_connection(0)) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) break;
      ::close(c);
    }
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A port nobody listens on now (the kernel's choice, released at once).
int free_port() {
  SilentListener probe;
  return probe.port();
}

// A connection to 127.0.0.1:`port` (fd() -1 when it cannot connect), closed with this object.
class Connection {
 public:
  explicit Connection(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ && ::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      fd_.close();
    }
  }
  int fd() const { return fd_.get(); }

 private:
  workload::UniqueFd fd_;
};

// The step of the last progress line ("[step  12/1000] ...") in `out`, or 0.
int last_step(const std::string& out) {
  const std::size_t at = out.rfind("[step ");
  return at == std::string::npos ? 0 : std::atoi(out.c_str() + at + 6);
}

// The processes of ours whose environment holds MASTER_PORT=`port` (and RANK=`rank`, unless -1):
// the ranks a launcher started.
std::vector<int> ranks_on(int port, int rank = -1) {
  const std::string marker = "MASTER_PORT=" + std::to_string(port);
  const std::string rank_marker = "RANK=" + std::to_string(rank);
  std::vector<int> pids;
  DIR* proc = ::opendir("/proc");
  if (!proc) return pids;
  while (const dirent* e = ::readdir(proc)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == ::getpid()) continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/environ", std::ios::binary);
    std::string entry;
    bool port_matches = false, rank_matches = rank < 0;
    while (std::getline(in, entry, '\0')) {
      port_matches = port_matches || entry == marker;
      rank_matches = rank_matches || entry == rank_marker;
    }
    if (port_matches && rank_matches) pids.push_back(pid);
  }
  ::closedir(proc);
  return pids;
}

// Kills the ranks on `port` (which outlive their launcher when a test kills it).
void kill_ranks_on(int port) {
  for (const int pid : ranks_on(port)) ::kill(pid, SIGKILL);
}

class DistLivenessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!workload::built(workload::Feature::kGloo)) {
      GTEST_SKIP() << "this build has no Gloo (c10d's CPU backend)";
    }
  }
  void TearDown() override {
    for (const int port : ports_) kill_ranks_on(port);
  }

  // train_resnet50's arguments for a small CPU rank: synthetic batches, 32 px, progress lines.
  std::vector<std::string> train(std::vector<std::string> extra) const {
    std::vector<std::string> a = {WORKLOAD_TRAIN_BIN, "--data=/nonexistent", "--synthetic",
                                  "--device=cpu",     "--batch-size=2",      "--image-size=32",
                                  "--warmup=1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  // The environment of rank `rank` of 2, as launch_local.sh sets it.
  std::vector<std::string> rank_env(int rank, int port) {
    ports_.push_back(port);
    return {"RANK=" + std::to_string(rank),
            "LOCAL_RANK=" + std::to_string(rank),
            "WORLD_SIZE=2",
            "LOCAL_WORLD_SIZE=2",
            "MASTER_ADDR=127.0.0.1",
            "MASTER_PORT=" + std::to_string(port)};
  }
  std::string report_of(int rank) const {
    return (tmp_.path() / ("run.rank" + std::to_string(rank) + ".json")).string();
  }
  std::string report_flag() const { return "--report=" + (tmp_.path() / "run.json").string(); }
  static nlohmann::json read_json(const std::string& path) {
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << path;
    return in.good() ? nlohmann::json::parse(in) : nlohmann::json::object();
  }
  // The program's start and exit on this machine now: added to the bounds on whole processes.
  static double start_and_exit_s() { return test_util::start_and_exit_seconds(WORKLOAD_TRAIN_BIN); }
  // Waits until `p`'s stdout holds `marker`; false after `timeout_s` or when `p` ended.
  static bool wait_for(test_util::Process& p, const std::string& marker, double timeout_s = 60) {
    const auto t = Clock::now();
    while (p.out().find(marker) == std::string::npos) {
      if (p.poll() || seconds_since(t) > timeout_s) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }

  test_util::TempDir tmp_;
  std::vector<int> ports_;
};

// How the ranks run: Gloo on the CPU, or NCCL on two GPUs, eager or replaying the DDP step's graph
// (whose collectives PyTorch's NCCL watchdog never sees).
enum class Ranks { kGloo, kNccl, kNcclGraph };

struct Loss {
  int victim;  // the rank signalled
  int signal;  // SIGKILL (dead) or SIGSTOP (frozen)
  Ranks ranks = Ranks::kGloo;
};

class DeadOrFrozenPeerTest : public DistLivenessTest, public ::testing::WithParamInterface<Loss> {
 protected:
  void SetUp() override {
    if (GetParam().ranks == Ranks::kGloo) return DistLivenessTest::SetUp();
    if (!workload::built(workload::Feature::kNccl)) {
      GTEST_SKIP() << "this build has no NCCL";
    }
    if (torch::cuda::device_count() < 2) GTEST_SKIP() << "two NCCL ranks need two GPUs";
  }
  // The ranks' arguments: on GPUs a run long enough to be killed in (a step takes milliseconds).
  std::vector<std::string> rank_args() const {
    switch (GetParam().ranks) {
      case Ranks::kGloo:
        return train({"--steps=1000", report_flag()});
      case Ranks::kNccl:
        return train({"--steps=1000000", "--device=cuda", report_flag()});
      case Ranks::kNcclGraph:
        return train(
            {"--steps=1000000", "--device=cuda", "--cuda-graph", "--warmup=11", report_flag()});
    }
    return {};
  }
};

// The survivor ends within 10 s, at the default --dist-timeout-s (300 s): exit 3, the missing rank
// named on its first stderr line and in its report, which says interrupted. Rank 0 serves the
// store: its loss is seen through the store (gone, or silent when frozen). On GPUs the survivor's
// NCCL kernels spin for the lost peer until the abort ends them, eager or replayed from a graph.
TEST_P(DeadOrFrozenPeerTest, TheOtherRankEndsWithinTenSecondsNamingIt) {
  const Loss loss = GetParam();
  const int port = free_port();
  const auto args = rank_args();
  test_util::Process rank0(args, rank_env(0, port)), rank1(args, rank_env(1, port));
  test_util::Process& victim = loss.victim == 0 ? rank0 : rank1;
  test_util::Process& survivor = loss.victim == 0 ? rank1 : rank0;
  ASSERT_TRUE(wait_for(survivor, "[step   2/")) << survivor.out() << survivor.err();
  victim.signal(loss.signal);
  const auto t = Clock::now();
  ASSERT_TRUE(survivor.wait(30)) << "the survivor still waits 30 s later; its threads:\n"
                                 << survivor.threads() << survivor.out() << survivor.err();
  const double took = seconds_since(t);
  EXPECT_LT(took, 10.0);
  EXPECT_EQ(survivor.exit_code(), 3) << survivor.err();
  const int survivor_rank = 1 - loss.victim;
  const std::string lost = "rank " + std::to_string(loss.victim) + " missing";
  EXPECT_EQ(
      first_line(survivor.err())
          .rfind("train_resnet50 (rank " + std::to_string(survivor_rank) + "): error: " + lost, 0),
      0u)
      << survivor.err();
  const auto j = read_json(report_of(survivor_rank));
  EXPECT_EQ(j.value("interrupted", false), true);
  EXPECT_EQ(j["dist"]["lost_rank"], loss.victim);
  EXPECT_NE(j["dist"]["aborted"].get<std::string>().find(lost), std::string::npos);
  EXPECT_GE(j["steps"].size(), 1u);
  const char* ranks = loss.ranks == Ranks::kGloo   ? "gloo"
                      : loss.ranks == Ranks::kNccl ? "nccl"
                                                   : "nccl --cuda-graph";
  std::printf("[ timing ] %s, rank %d %s: rank %d exited %d after %.2f s\n", ranks, loss.victim,
              loss.signal == SIGKILL ? "killed" : "frozen", survivor_rank, survivor.exit_code(),
              took);
}

INSTANTIATE_TEST_SUITE_P(KilledAndFrozen, DeadOrFrozenPeerTest,
                         ::testing::Values(Loss{1, SIGKILL}, Loss{0, SIGKILL}, Loss{1, SIGSTOP},
                                           Loss{0, SIGSTOP}),
                         [](const auto& info) {
                           return std::string(info.param.signal == SIGKILL ? "Killed" : "Frozen") +
                                  "Rank" + std::to_string(info.param.victim);
                         });
INSTANTIATE_TEST_SUITE_P(
    TwoGpus, DeadOrFrozenPeerTest,
    ::testing::Values(Loss{1, SIGKILL, Ranks::kNccl}, Loss{0, SIGKILL, Ranks::kNccl},
                      Loss{1, SIGSTOP, Ranks::kNccl}, Loss{1, SIGKILL, Ranks::kNcclGraph},
                      Loss{0, SIGKILL, Ranks::kNcclGraph}, Loss{1, SIGSTOP, Ranks::kNcclGraph}),
    [](const auto& info) {
      return std::string(info.param.ranks == Ranks::kNccl ? "Nccl" : "NcclGraph") +
             (info.param.signal == SIGKILL ? "Killed" : "Frozen") + "Rank" +
             std::to_string(info.param.victim);
    });

// A client that stops in the middle of a request to the store (as SIGSTOP can leave a peer,
// between two writes of one request) costs the store that connection, not its answers: the ranks
// train on past the peer timeout. LibTorch 1.13's store waited for the rest of the request for
// ever: every rank missed the store 5 s later, and rank 0's teardown never ended.
TEST_F(DistLivenessTest, AClientStoppedInTheMiddleOfAStoreRequestSilencesItForNobody) {
  const int port = free_port();
  const auto args = train({"--steps=1000", report_flag()});
  test_util::Process rank0(args, rank_env(0, port)), rank1(args, rank_env(1, port));
  ASSERT_TRUE(wait_for(rank0, "[step   2/")) << rank0.out() << rank0.err();
  const Connection client(port);
  ASSERT_GE(client.fd(), 0) << "cannot connect to the store at 127.0.0.1:" << port;
  const unsigned char query = 3;  // the first byte of a request (c10d's query type); no more comes
  ASSERT_EQ(::send(client.fd(), &query, 1, 0), 1);
  const int step_then = last_step(rank0.out());
  // The peer timeout (5 s) and three beats: a store silent all along would have ended both ranks.
  std::this_thread::sleep_for(std::chrono::seconds(8));
  EXPECT_FALSE(rank0.poll()) << rank0.err();
  EXPECT_FALSE(rank1.poll()) << rank1.err();
  EXPECT_GT(last_step(rank0.out()), step_then) << rank0.out();
}

// Liveness is not progress: rank 1 sleeps 12 s inside a step (over twice the 5 s peer timeout)
// while rank 0 waits for it in backward's all-reduce; both beat, and the run completes.
TEST_F(DistLivenessTest, ASlowRankIsNotMissing) {
  const int port = free_port();
  const auto t = Clock::now();
  test_util::Process rank0(train({"--steps=3", report_flag()}), rank_env(0, port));
  test_util::Process rank1(train({"--steps=3", report_flag(), "--inject-stall=backward@1:12000"}),
                           rank_env(1, port));
  ASSERT_TRUE(rank1.wait(120));
  ASSERT_TRUE(rank0.wait(30));
  EXPECT_EQ(rank0.exit_code(), 0) << rank0.err();
  EXPECT_EQ(rank1.exit_code(), 0) << rank1.err();
  EXPECT_GE(seconds_since(t), 12.0);
  for (int r = 0; r < 2; ++r) {
    const auto j = read_json(report_of(r));
    EXPECT_EQ(j.value("interrupted", true), false) << r;
    EXPECT_EQ(j["dist"]["peer_timeout_s"], 5) << r;  // the stall lasted over twice that
    EXPECT_EQ(j["dist"]["aborted"], "") << r;
  }
}

class SignalInCollectiveTest : public DistLivenessTest,
                               public ::testing::WithParamInterface<int> {};

// Rank 1 sleeps 60 s inside a step, so rank 0 waits in backward's all-reduce and never reaches the
// step boundary where the ranks agree on a stop: a signal to it aborts its group within 5 s (no
// SIGKILL needed), and rank 1, told through the store, ends its sleep and exits too.
TEST_P(SignalInCollectiveTest, TheSignalledRankExitsWithinFiveSeconds) {
  const int sig = GetParam();
  const int port = free_port();
  test_util::Process rank0(train({"--steps=3", report_flag()}), rank_env(0, port));
  test_util::Process rank1(train({"--steps=3", report_flag(), "--inject-stall=backward@1:60000"}),
                           rank_env(1, port));
  ASSERT_TRUE(wait_for(rank1, "[step   1/")) << rank1.out() << rank1.err();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // rank 0 in the all-reduce
  rank0.signal(sig);
  const auto t = Clock::now();
  ASSERT_TRUE(rank0.wait(30));
  const double took = seconds_since(t);
  EXPECT_LT(took, 5.0);
  EXPECT_EQ(rank0.exit_code(), 128 + sig) << rank0.err();
  const auto j0 = read_json(report_of(0));
  EXPECT_EQ(j0.value("interrupted", false), true);
  EXPECT_EQ(j0["interrupt_signal"], sig == SIGINT ? "SIGINT" : "SIGTERM");
  EXPECT_NE(j0["dist"]["aborted"].get<std::string>().find("no step boundary"), std::string::npos);
  ASSERT_TRUE(rank1.wait(15)) << "rank 1 sleeps on after rank 0 left";
  EXPECT_EQ(rank1.exit_code(), 3) << rank1.err();
  EXPECT_EQ(first_line(rank1.err()).rfind("train_resnet50 (rank 1): error: rank 0", 0), 0u)
      << rank1.err();
  std::printf("[ timing ] %s to rank 0 in a collective: exited after %.2f s, rank 1 %.2f s\n",
              sig == SIGINT ? "SIGINT" : "SIGTERM", took, seconds_since(t));
}

INSTANTIATE_TEST_SUITE_P(IntAndTerm, SignalInCollectiveTest, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& info) {
                           return info.param == SIGINT ? "SIGINT" : "SIGTERM";
                         });

// A store that accepts the connection and never answers (a stale listener on the port, or a rank 0
// frozen after binding it): the rendezvous ends within --dist-timeout-s and a few seconds, exit 2,
// the program's message first; a signal ends it at once.
TEST_F(DistLivenessTest, ASilentStoreBoundsTheRendezvousAndASignalEndsItAtOnce) {
  SilentListener silent;
  const double start = start_and_exit_s();
  const auto args = train({"--steps=3", "--dist-timeout-s=3"});
  const auto r = test_util::run_process(args, rank_env(1, silent.port()), 60);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_LT(r.seconds, start + 3 + 3.0) << "start and exit alone took " << start << " s";
  EXPECT_EQ(first_line(r.err).rfind("train_resnet50 (rank 1): MASTER_ADDR:MASTER_PORT:", 0), 0u)
      << r.err;
  EXPECT_NE(r.err.find("did not answer within 3 s"), std::string::npos) << r.err;
  std::printf(
      "[ timing ] silent store, --dist-timeout-s 3: exit %d after %.2f s (start and exit "
      "alone %.2f s)\n",
      r.exit_code, r.seconds, start);

  silent.drop_connections();
  test_util::Process waiting(train({"--steps=3", "--dist-timeout-s=60"}),
                             rank_env(1, silent.port()));
  ASSERT_TRUE(silent.wait_for_connection(60)) << waiting.err();
  ASSERT_FALSE(waiting.poll()) << waiting.err();
  waiting.signal(SIGTERM);
  const auto t = Clock::now();
  ASSERT_TRUE(waiting.wait(30)) << "SIGTERM did not end the rendezvous";
  EXPECT_LT(seconds_since(t), 1.0);
  EXPECT_EQ(waiting.exit_code(), 128 + SIGTERM) << waiting.err();
  EXPECT_NE(waiting.err().find("SIGTERM during the rendezvous"), std::string::npos)
      << waiting.err();
  std::printf("[ timing ] silent store, SIGTERM: exit %d after %.2f s\n", waiting.exit_code(),
              seconds_since(t));
}

TEST_F(DistLivenessTest, ARankZeroFrozenAfterBindingBoundsTheRendezvous) {
  const int port = free_port();
  test_util::Process rank0(train({"--steps=3", "--dist-timeout-s=60"}), rank_env(0, port));
  // Frozen once its store listens (the kernel still completes connections to it).
  const auto t0 = Clock::now();
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    if (up) break;
    ASSERT_LT(seconds_since(t0), 30.0) << rank0.err();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  rank0.signal(SIGSTOP);
  const double start = start_and_exit_s();
  const auto r =
      test_util::run_process(train({"--steps=3", "--dist-timeout-s=3"}), rank_env(1, port), 60);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_LT(r.seconds, start + 3 + 3.0) << "start and exit alone took " << start << " s";
  EXPECT_EQ(first_line(r.err).rfind("train_resnet50 (rank 1): MASTER_ADDR:MASTER_PORT:", 0), 0u)
      << r.err;
}

// A lone rank 0 says who did not join, once the timeout has passed and not later.
TEST_F(DistLivenessTest, ALoneRankSaysWhoDidNotJoinInTime) {
  const int port = free_port();
  const double start = start_and_exit_s();
  const auto r =
      test_util::run_process(train({"--steps=3", "--dist-timeout-s=3"}), rank_env(0, port), 60);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_GE(r.seconds, 3.0);
  EXPECT_LT(r.seconds, start + 3 + 3.0) << "start and exit alone took " << start << " s";
  EXPECT_EQ(first_line(r.err).rfind("train_resnet50 (rank 0): MASTER_ADDR:MASTER_PORT:", 0), 0u)
      << r.err;
  EXPECT_NE(r.err.find("rank 1 did not join within 3 s"), std::string::npos) << r.err;
}

// scripts/launch_local.sh with a stale listener on --port: rank 0 cannot serve the store (exit 2),
// rank 1 gets no answer from the listener (exit 2 within its --dist-timeout-s), and the launcher,
// which waits for every rank, ends with them; a SIGTERM to the launcher ends everything at once.
TEST_F(DistLivenessTest, LaunchLocalWithAStaleListenerEndsEverything) {
  SilentListener stale;
  ports_.push_back(stale.port());
  const std::vector<std::string> launch = {LAUNCH_LOCAL, "2", "--port",
                                           std::to_string(stale.port()), "--"};
  auto args = launch;
  for (const auto& a : train({"--steps=3", "--dist-timeout-s=3"})) args.push_back(a);
  const double start = start_and_exit_s();
  const auto r = test_util::run_process(args, {}, 60);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_LT(r.seconds, start + 3 + 4.0) << "start and exit alone took " << start << " s";
  EXPECT_NE(r.err.find("(rank 0): MASTER_ADDR:MASTER_PORT"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(rank 1): MASTER_ADDR:MASTER_PORT"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Logging before InitGoogleLogging"), std::string::npos) << r.err;
  std::printf(
      "[ timing ] launch_local.sh, stale listener, --dist-timeout-s 3: exit %d after %.2f s\n",
      r.exit_code, r.seconds);

  args = launch;
  for (const auto& a : train({"--steps=3", "--dist-timeout-s=60"})) args.push_back(a);
  const auto t = test_util::run_process(args, {}, 60, SIGTERM, 2.0);
  EXPECT_FALSE(t.timed_out);
  EXPECT_LT(t.seconds, 2.0 + 2.0 + start) << "start and exit alone took " << start << " s";
  EXPECT_NE(t.exit_code, 0) << t.err;
  std::printf("[ timing ] launch_local.sh, stale listener, SIGTERM at 2 s: exit %d after %.2f s\n",
              t.exit_code, t.seconds);
}

// Under scripts/launch_local.sh a frozen rank cannot end by itself: rank 0 names it and exits 3
// within 10 s, and the launcher, --grace seconds after that failure, ends it (SIGTERM, then
// SIGKILL), so that everything ends.
TEST_F(DistLivenessTest, UnderLaunchLocalAFrozenRankEndsEverything) {
  const int port = free_port();
  ports_.push_back(port);
  std::vector<std::string> args = {LAUNCH_LOCAL, "2", "--port", std::to_string(port),
                                   "--grace",    "2", "--"};
  for (const auto& a : train({"--steps=1000", report_flag()})) args.push_back(a);
  test_util::Process launcher(args);
  ASSERT_TRUE(wait_for(launcher, "[rank 1] [step   2/")) << launcher.out() << launcher.err();
  const std::vector<int> rank1 = ranks_on(port, 1);
  ASSERT_EQ(rank1.size(), 1u);
  ::kill(rank1[0], SIGSTOP);
  const auto t = Clock::now();
  ASSERT_TRUE(launcher.wait(40)) << "the launcher still waits 40 s later";
  EXPECT_LT(seconds_since(t), 10.0 + 2 * 2 + 1);
  EXPECT_EQ(launcher.exit_code(), 3) << launcher.err();  // rank 0's, the first to fail
  EXPECT_EQ(first_line(launcher.err()).rfind("train_resnet50 (rank 0): error: rank 1 missing", 0),
            0u)
      << launcher.err();
  EXPECT_NE(launcher.err().find("SIGKILL"), std::string::npos) << launcher.err();
  EXPECT_EQ(read_json(report_of(0))["dist"]["lost_rank"], 1);
  EXPECT_TRUE(ranks_on(port).empty());
  std::printf("[ timing ] launch_local.sh, rank 1 frozen: everything ended after %.2f s\n",
              seconds_since(t));
}

}  // namespace

// MASTER_ADDR that does not resolve: named at once, not a silent wait for --dist-timeout-s.
TEST_F(DistLivenessTest, AStoreHostThatDoesNotResolveIsNamedAtOnce) {
  std::vector<std::string> env = rank_env(1, free_port());
  for (auto& v : env) {
    if (v.rfind("MASTER_ADDR=", 0) == 0) v = "MASTER_ADDR=nonexistent.invalid";
  }
  const auto r = test_util::run_process(train({"--steps=1", "--dist-timeout-s=120"}), env, 60);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_LT(r.seconds, 30.0);
  EXPECT_EQ(first_line(r.err).rfind("train_resnet50 (rank 1): MASTER_ADDR: 'nonexistent.invalid' "
                                    "does not resolve",
                                    0),
            0u)
      << r.err;
}

// A rank whose store is not up yet says what it waits for after a few seconds (on stdout: its
// stderr's first line stays the error), and a signal then ends it at once, saying so, whatever
// c10d's connect is doing (no listener: it retries, with nothing an abort could shut).
TEST_F(DistLivenessTest, AWaitingRendezvousSaysWhatItWaitsForAndASignalEndsItAtOnce) {
  test_util::Process waiting(train({"--steps=1", "--dist-timeout-s=60"}), rank_env(1, free_port()));
  ASSERT_TRUE(wait_for(waiting, "rendezvous: waiting for the store at 127.0.0.1:", 20))
      << waiting.out() << waiting.err();
  EXPECT_NE(waiting.out().find("[rank 1] rendezvous: waiting for the store at 127.0.0.1:"),
            std::string::npos)
      << waiting.out();
  EXPECT_NE(waiting.out().find("(served by rank 0)"), std::string::npos) << waiting.out();
  waiting.signal(SIGTERM);
  const auto t = Clock::now();
  ASSERT_TRUE(waiting.wait(30)) << "SIGTERM did not end the rendezvous";
  EXPECT_LT(seconds_since(t), 1.0);
  EXPECT_EQ(waiting.exit_code(), 128 + SIGTERM) << waiting.err();
  EXPECT_NE(waiting.err().find("SIGTERM during the rendezvous (rank 1 of 2, store 127.0.0.1:"),
            std::string::npos)
      << waiting.err();
  EXPECT_NE(waiting.err().find("stopped before the run"), std::string::npos) << waiting.err();
  EXPECT_EQ(waiting.err().find("did not come back"), std::string::npos) << waiting.err();
}

// Each rank writes its own profiler trace, as its own report; a rank's own paths are checked
// before the rendezvous: one that cannot be written is a usage error up front.
TEST_F(DistLivenessTest, EachRanksOutputPathsAreItsOwnAndCheckedBeforeTheRendezvous) {
  const int port = free_port();
  std::vector<std::string> env = rank_env(0, port);
  for (auto& v : env) {
    if (v == "WORLD_SIZE=2") v = "WORLD_SIZE=1";
    if (v == "LOCAL_WORLD_SIZE=2") v = "LOCAL_WORLD_SIZE=1";
  }
  const std::string trace = "--torch-profiler-trace=" + (tmp_.path() / "trace.json").string();
  auto r = test_util::run_process(train({"--steps=1", report_flag(), trace}), env, 300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(report_of(0)));
  EXPECT_TRUE(fs::exists(tmp_.path() / "trace.rank0.json")) << "each rank names its trace";
  EXPECT_FALSE(fs::exists(tmp_.path() / "trace.json"));
  EXPECT_EQ(read_json(report_of(0))["capture"]["torch_profiler_trace"],
            (tmp_.path() / "trace.rank0.json").string());

  fs::remove(report_of(0));
  fs::create_directory(report_of(0));
  const auto t = Clock::now();
  r = test_util::run_process(train({"--steps=1", report_flag()}), env, 60);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_LT(seconds_since(t), 20.0);
  EXPECT_NE(r.err.find("--report (rank 0): " + report_of(0) + " is a directory"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("[step"), std::string::npos) << "no step ran";
}
