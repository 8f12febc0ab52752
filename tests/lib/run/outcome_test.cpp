// Tests for how a run of train_resnet50 ends: 0, 128 + the signal, or 3 with one line naming the
// lost peer, the steps run and the report, for a run that came back and for a setup that did not.
#include "lib/run/outcome.h"

#include <gtest/gtest.h>

#include <csignal>

namespace workload {
namespace {

const std::string kWho = "train_resnet50 (rank 0)";

TEST(OutcomeTest, ACompletedRunIsZeroAndSaysNothing) {
  const Outcome o = run_outcome(RunResult{}, -1, -1, kWho, "r.json");
  EXPECT_EQ(o.status, 0);
  EXPECT_EQ(o.message, "");
}

TEST(OutcomeTest, AStoppedRunIsTheSignalsStatus) {
  RunResult r;
  r.interrupted = true;
  EXPECT_EQ(run_outcome(r, SIGTERM, SIGTERM, kWho, "").status, 128 + SIGTERM);
  // Another rank's signal, agreed on: this rank stops with it.
  EXPECT_EQ(run_outcome(r, -1, SIGINT, kWho, "").status, 128 + SIGINT);
}

TEST(OutcomeTest, ALostPeerIsThreeWithOneLineSayingSo) {
  RunResult r;
  r.interrupted = true;
  r.aborted = "rank 1 missing: no heartbeat for 5.0 s";
  r.warmup_steps.resize(3);
  r.steps.resize(2);
  Outcome o = run_outcome(r, -1, -1, kWho, "run.rank0.json");
  EXPECT_EQ(o.status, 3);
  EXPECT_EQ(o.message,
            "train_resnet50 (rank 0): error: rank 1 missing: no heartbeat for 5.0 s; the run "
            "stopped after 5 steps; report: run.rank0.json\n");
  // With this rank's own stop request, the abort is how the stop ended: the signal's status.
  o = run_outcome(r, SIGTERM, SIGTERM, kWho, "");
  EXPECT_EQ(o.status, 128 + SIGTERM);
  EXPECT_EQ(o.message, "train_resnet50 (rank 0): rank 1 missing: no heartbeat for 5.0 s\n");
}

TEST(OutcomeTest, ASetupEndedByALostPeerSaysBeforeTheFirstStep) {
  DistVerdict v;
  v.kind = DistVerdict::Kind::kPeerLost;
  v.rank = 1;
  v.reason = "rank 1 failed: cannot decode";
  const Outcome o = setup_outcome(PeerLost(v), -1, kWho);
  EXPECT_EQ(o.status, 3);
  EXPECT_EQ(o.message,
            "train_resnet50 (rank 0): error: rank 1 failed: cannot decode; the run stopped before "
            "its first step\n");
  EXPECT_EQ(setup_outcome(PeerLost(v), SIGINT, kWho).status, 128 + SIGINT);
}

}  // namespace
}  // namespace workload
