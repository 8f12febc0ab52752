// Tests for the ranks' stop agreement's record: one encoder and one decoder (the signal travels as
// a number, never parsed back out of a message), values that are not one refused, and the words
// the report and summary use.
#include "lib/distributed/stop_agreement.h"

#include <gtest/gtest.h>

#include <csignal>

namespace workload {
namespace {

TEST(StopAgreementTest, AProposalRoundTrips) {
  const StopProposal p{17, 1, SIGTERM};
  EXPECT_EQ(encode(p), "17|1|" + std::to_string(SIGTERM));
  EXPECT_EQ(decode_stop_proposal(encode(p)), p);
  const StopProposal none{3, 0, 0};  // a request without a signal
  EXPECT_EQ(decode_stop_proposal(encode(none)), none);
  EXPECT_EQ(kStopMargin, 3);
}

TEST(StopAgreementTest, WhatIsNotAProposalIsRefused) {
  for (const char* bad : {"", "17", "17|1", "17|1|", "x|1|15", "17|y|15", "17|1|15 rank",
                          "17 rank 1: SIGTERM", "99999999999999999999|1|15"}) {
    EXPECT_FALSE(decode_stop_proposal(bad)) << bad;
  }
}

TEST(StopAgreementTest, ItIsDescribedByWhoAndWhy) {
  EXPECT_EQ(describe({17, 1, SIGTERM}), "rank 1: SIGTERM");
  EXPECT_EQ(describe({5, 0, SIGINT}), "rank 0: SIGINT");
  EXPECT_EQ(describe({5, 2, 0}), "rank 2: none");
}

}  // namespace
}  // namespace workload
