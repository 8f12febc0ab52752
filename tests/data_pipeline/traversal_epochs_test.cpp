// Tests for TraversalEpochs: the next traversal's first epoch follows what the consumer took, not
// how far the producers ran ahead; an explicit epoch overrides the rule.
#include "data_pipeline/traversal_epochs.h"

#include <gtest/gtest.h>

namespace data_pipeline {
namespace {

TEST(TraversalEpochsTest, TheFirstTraversalStartsAtEpochZero) {
  const TraversalEpochs epochs;
  EXPECT_EQ(epochs.first(), 0);
}

TEST(TraversalEpochsTest, TheNextTraversalStartsAfterTheLastEpochTaken) {
  TraversalEpochs epochs;
  epochs.taken(0);
  epochs.taken(1);
  epochs.taken(2);
  EXPECT_EQ(epochs.start_next(), 3);
  EXPECT_EQ(epochs.first(), 3);
  // Only the last epoch taken counts, whatever came before it.
  epochs.taken(5);
  epochs.taken(4);
  EXPECT_EQ(epochs.start_next(), 5);
}

TEST(TraversalEpochsTest, WithNothingTakenTheNextTraversalStartsAfterTheCurrentFirst) {
  TraversalEpochs epochs;
  EXPECT_EQ(epochs.start_next(), 1);
  EXPECT_EQ(epochs.start_next(), 2);
  epochs.taken(2);
  EXPECT_EQ(epochs.start_next(), 3);
  // What was taken in an earlier traversal does not carry over.
  EXPECT_EQ(epochs.start_next(), 4);
}

TEST(TraversalEpochsTest, AnExplicitEpochOverridesTheRule) {
  TraversalEpochs epochs;
  epochs.taken(7);
  EXPECT_EQ(epochs.start_next(2), 2);
  EXPECT_EQ(epochs.first(), 2);
  // The override forgets what was taken before it, and the rule goes on from it.
  EXPECT_EQ(epochs.start_next(), 3);
  epochs.taken(3);
  EXPECT_EQ(epochs.start_next(0), 0);
  EXPECT_EQ(epochs.start_next(), 1);
}

}  // namespace
}  // namespace data_pipeline
