// Tests for BatchRing: the slot state machine, ordering and the bound on batches in flight,
// one-sample claims, reuse fences, failures, reset, shutdown, and a threaded run that would see a
// slot shared by two live batches.
#include "data_pipeline/batch_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <stdexcept>
#include <thread>

#include "data_pipeline/data_error.h"

namespace data_pipeline {
namespace {

using namespace std::chrono_literals;

RingShape shape(std::size_t slots, std::int64_t ahead, std::int64_t batch = 4,
                std::int64_t dataset = 12, bool whole = true) {
  RingShape s;
  s.slots = slots;
  s.ahead = ahead;
  s.batch_size = batch;
  s.dataset_size = dataset;
  s.whole_batches = whole;
  s.slot_image_bytes = static_cast<std::size_t>(batch) * 8;
  return s;
}

// Claims, opens and finishes the next batch on this thread.
RingClaim fill_next(BatchRing& ring) {
  auto c = ring.try_claim();
  EXPECT_TRUE(c.has_value());
  if (!c) throw std::runtime_error("no claim");
  ring.open(*c);
  EXPECT_TRUE(ring.finish(*c));
  return *c;
}

TEST(BatchRingTest, RejectsInconsistentShapes) {
  EXPECT_THROW(BatchRing(shape(2, 2)), std::invalid_argument);  // ahead must be < slots
  EXPECT_THROW(BatchRing(shape(3, -1)), std::invalid_argument);
  EXPECT_THROW(BatchRing(shape(3, 1, 0)), std::invalid_argument);       // empty batches
  EXPECT_THROW(BatchRing(shape(3, 1, 13, 12)), std::invalid_argument);  // no batch with drop_last
  RingShape partial = shape(3, 1, 13, 12);
  partial.drop_last = false;
  EXPECT_EQ(BatchRing(partial).batches_per_epoch(), 1);
}

TEST(BatchRingTest, SlotsAreDisjointAlignedRegionsOfOneBlock) {
  BatchRing ring(shape(4, 2, 4, 12));
  EXPECT_FALSE(ring.pinned());  // not asked for
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ring.images(i)) % 256, 0u);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ring.labels(i)) % 256, 0u);
    if (i > 0) {
      EXPECT_GE(ring.images(i) - ring.images(i - 1), 32);
    }
  }
  EXPECT_GE(reinterpret_cast<std::uint8_t*>(ring.labels(0)), ring.images(3) + 32);
  EXPECT_GE(ring.bytes(), 4u * (32 + 32));
}

TEST(BatchRingTest, DeliversInOrderWithinTheBoundAndRollsOverEpochs) {
  BatchRing ring(shape(4, 2, 4, 12));  // 3 batches per epoch
  EXPECT_EQ(ring.batches_per_epoch(), 3);
  const RingClaim c0 = fill_next(ring);
  const RingClaim c1 = fill_next(ring);
  EXPECT_FALSE(ring.try_claim().has_value());  // two ahead of the consumer already
  EXPECT_TRUE(c0.opener);
  EXPECT_EQ(c0.first, 0);
  EXPECT_EQ(c0.last, 4);
  EXPECT_EQ(c1.slot, 1u);
  for (std::int64_t seq = 0; seq < 7; ++seq) {
    const RingLease lease = ring.acquire();
    EXPECT_EQ(lease.batch.sequence, seq);
    EXPECT_EQ(lease.slot, static_cast<std::size_t>(seq % 4));
    EXPECT_EQ(lease.batch.epoch, seq / 3);
    EXPECT_EQ(lease.batch.index_in_epoch, seq % 3);
    EXPECT_EQ(lease.batch.count, 4);
    ring.release(lease.slot, nullptr);
    fill_next(ring);  // the bound moved by one
  }
}

TEST(BatchRingTest, LastShortBatchWithoutDropLast) {
  RingShape s = shape(3, 1, 5, 12);
  s.drop_last = false;
  BatchRing ring(s);
  std::vector<std::int64_t> counts;
  for (int i = 0; i < 4; ++i) {
    fill_next(ring);
    const RingLease lease = ring.acquire();
    counts.push_back(lease.batch.count);
    ring.release(lease.slot, nullptr);
  }
  EXPECT_EQ(counts, (std::vector<std::int64_t>{5, 5, 2, 5}));
}

TEST(BatchRingTest, OneSampleClaimsMakeABatchReadyOnlyWhenAllFinished) {
  BatchRing ring(shape(3, 1, 3, 12, /*whole=*/false));
  std::vector<RingClaim> claims;
  for (int k = 0; k < 3; ++k) {
    auto c = ring.try_claim();
    ASSERT_TRUE(c);
    EXPECT_EQ(c->first, k);
    EXPECT_EQ(c->last, k + 1);
    EXPECT_EQ(c->opener, k == 0);
    EXPECT_EQ(c->batch.sequence, 0);
    claims.push_back(*c);
  }
  EXPECT_FALSE(ring.try_claim());  // batch 1 would be two ahead
  ring.open(claims[0]);
  ring.open(claims[2]);  // non-openers return once the opener has opened
  ring.open(claims[1]);
  ring.finish(claims[2]);
  ring.finish(claims[0]);
  auto pending = std::async(std::launch::async, [&] { return ring.acquire(); });
  EXPECT_EQ(pending.wait_for(100ms), std::future_status::timeout);
  ring.finish(claims[1]);
  EXPECT_EQ(pending.get().batch.sequence, 0);
}

TEST(BatchRingTest, ALeasedSlotStallsClaimsInsteadOfBeingShared) {
  BatchRing ring(shape(3, 1));  // slots for seq 0..2; seq 3 maps to slot 0 again
  std::vector<RingLease> held;
  for (int i = 0; i < 3; ++i) {
    fill_next(ring);
    held.push_back(ring.acquire());  // the consumer keeps every batch
  }
  EXPECT_FALSE(ring.try_claim());  // seq 3 needs slot 0, still leased
  ring.release(held[1].slot, nullptr);
  EXPECT_FALSE(ring.try_claim());  // releasing another slot does not help
  ring.release(held[0].slot, nullptr);
  const auto c = ring.try_claim();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->batch.sequence, 3);
  EXPECT_EQ(c->slot, 0u);
  EXPECT_THROW(ring.release(held[0].slot, nullptr), std::logic_error);  // not leased any more
}

TEST(BatchRingTest, TheOpenerWaitsTheReuseFenceBeforeAnyWriter) {
  BatchRing ring(shape(2, 1, 2, 12, /*whole=*/false));
  // Fill and lease batch 0 (slot 0), then release it behind a fence that blocks until allowed.
  for (int k = 0; k < 2; ++k) {
    auto c = ring.try_claim();
    ring.open(*c);
    ring.finish(*c);
  }
  const RingLease lease = ring.acquire();
  std::promise<void> allow;
  std::shared_future<void> allowed = allow.get_future().share();
  std::atomic<bool> fence_done{false};
  ring.release(lease.slot, [&] {
    allowed.wait();
    fence_done = true;
  });
  // Batch 1 goes to slot 1 (no fence), batch 2 back to slot 0.
  for (int k = 0; k < 2; ++k) {
    auto c = ring.try_claim();
    ring.open(*c);
    ring.finish(*c);
  }
  ring.release(ring.acquire().slot, nullptr);
  const auto opener = ring.try_claim();
  const auto other = ring.try_claim();
  ASSERT_TRUE(opener && other);
  ASSERT_EQ(opener->slot, 0u);
  EXPECT_TRUE(opener->opener);
  EXPECT_FALSE(other->opener);
  auto other_open = std::async(std::launch::async, [&] { ring.open(*other); });
  auto opener_open = std::async(std::launch::async, [&] { ring.open(*opener); });
  EXPECT_EQ(other_open.wait_for(100ms), std::future_status::timeout);
  EXPECT_EQ(opener_open.wait_for(10ms), std::future_status::timeout);
  allow.set_value();
  opener_open.get();
  other_open.get();
  EXPECT_TRUE(fence_done);
}

TEST(BatchRingTest, AFailedFenceOrWriterFailsItsBatchAndTheRingStaysFailed) {
  {
    BatchRing ring(shape(2, 1));
    fill_next(ring);
    ring.release(ring.acquire().slot, [] { throw std::runtime_error("device lost"); });
    fill_next(ring);  // slot 1
    ring.release(ring.acquire().slot, nullptr);
    fill_next(ring);  // slot 0 again: its opener meets the failing fence
    try {
      ring.acquire();
      FAIL() << "expected the fence's error";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "loader (waiting for the device to release the slot): device lost");
    }
  }
  BatchRing ring(shape(3, 2));
  auto c = ring.try_claim();
  ring.open(*c);
  ring.finish(*c, std::make_exception_ptr(DataError("x.jpg: bad")), "batch 0 of epoch 0, sample 2");
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      ring.acquire();
      FAIL() << "expected the writer's DataError";
    } catch (const DataError& e) {  // the type is kept
      EXPECT_STREQ(e.what(), "loader (batch 0 of epoch 0, sample 2): x.jpg: bad");
    }
  }
  EXPECT_FALSE(ring.claim().has_value());  // writers stop once the ring failed
}

TEST(BatchRingTest, ResetAbandonsClaimedBatchesAndStartsTheNextEpoch) {
  BatchRing ring(shape(4, 2, 4, 12));
  fill_next(ring);
  const RingLease first = ring.acquire();  // epoch 0, batch 0
  ring.release(first.slot, nullptr);
  const RingClaim ready = fill_next(ring);  // batch 1: ready, not consumed
  const auto writing = ring.try_claim();    // batch 2: a writer still inside
  ASSERT_TRUE(writing);
  EXPECT_TRUE(ring.live(*writing));
  ring.reset();
  EXPECT_FALSE(ring.live(*writing));
  EXPECT_FALSE(ring.live(ready));
  // The new traversal starts at the consumer's next sequence, epoch 1, batch 0. Its first claim
  // reuses the abandoned ready batch's slot (no writer left in it).
  const RingClaim next = fill_next(ring);
  EXPECT_EQ(next.batch.sequence, 1);
  EXPECT_EQ(next.batch.epoch, 1);
  EXPECT_EQ(next.batch.index_in_epoch, 0);
  // Batch 2 of the new traversal maps to the slot the stale writer still holds: no claim until it
  // leaves. Its finish does not count toward any batch.
  EXPECT_FALSE(ring.try_claim());
  ring.open(*writing);
  EXPECT_FALSE(ring.finish(*writing));
  const auto c = ring.try_claim();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->batch.sequence, 2);
  EXPECT_EQ(c->batch.index_in_epoch, 1);
  const RingLease lease = ring.acquire();
  EXPECT_EQ(lease.batch.epoch, 1);
  EXPECT_EQ(lease.batch.index_in_epoch, 0);
  // A reset before the consumer took anything from a traversal still moves to the next epoch.
  ring.release(lease.slot, nullptr);
  ring.reset();
  ring.reset();
  ring.open(*c);
  ring.finish(*c);
  EXPECT_EQ(fill_next(ring).batch.epoch, 3);
}

TEST(BatchRingTest, InlineClaimsCoverTheWholeBatchAndNeedAFreeSlot) {
  BatchRing ring(shape(2, 0, 4, 12, /*whole=*/false));
  EXPECT_FALSE(ring.try_claim());  // ahead 0: no writer claims
  const RingClaim c = ring.claim_inline();
  EXPECT_EQ(c.first, 0);
  EXPECT_EQ(c.last, 4);
  ring.open(c);
  ring.finish(c);
  const RingLease a = ring.acquire();
  const RingClaim d = ring.claim_inline();
  ring.open(d);
  ring.finish(d);
  const RingLease b = ring.acquire();
  EXPECT_THROW(ring.claim_inline(), std::logic_error);  // both slots leased
  ring.release(a.slot, nullptr);
  ring.release(b.slot, nullptr);
  EXPECT_EQ(ring.claim_inline().batch.sequence, 2);
}

TEST(BatchRingTest, StopAndCancelWakeEveryWaiter) {
  {
    BatchRing ring(shape(3, 1));
    fill_next(ring);
    ring.acquire();  // leased; the next claim waits for the consumer
    // Two writers: one claims batch 1 (within the bound), the other waits for batch 2.
    auto a = std::async(std::launch::async, [&] { return ring.claim(); });
    auto b = std::async(std::launch::async, [&] { return ring.claim(); });
    auto consumer = std::async(std::launch::async, [&] { ring.acquire(); });
    std::this_thread::sleep_for(100ms);
    const bool a_ready = a.wait_for(0ms) == std::future_status::ready;
    const bool b_ready = b.wait_for(0ms) == std::future_status::ready;
    EXPECT_NE(a_ready, b_ready) << "exactly one claim is possible before the consumer moves on";
    ring.stop();
    const auto ca = a.get(), cb = b.get();
    EXPECT_EQ(ca.has_value() + cb.has_value(), 1);  // the waiting one got nothing
    EXPECT_EQ((ca ? ca : cb)->batch.sequence, 1);
    EXPECT_THROW(consumer.get(), std::logic_error);
  }
  BatchRing ring(shape(3, 1));
  auto consumer = std::async(std::launch::async, [&] { ring.acquire(); });
  std::this_thread::sleep_for(50ms);
  ring.cancel();
  EXPECT_THROW(consumer.get(), Cancelled);
  EXPECT_THROW(ring.acquire(), Cancelled);
}

TEST(BatchRingTest, DestructionWaitsTheFencesOfReleasedSlots) {
  std::atomic<int> waited{0};
  {
    BatchRing ring(shape(3, 1));
    fill_next(ring);
    ring.release(ring.acquire().slot, [&] { ++waited; });
    fill_next(ring);
    ring.release(ring.acquire().slot, [&] {
      ++waited;
      throw std::runtime_error("ignored on teardown");
    });
  }
  EXPECT_EQ(waited, 2);
}

// Writers stamp every byte of a batch with its sequence; the consumer holds up to two leases at a
// time and checks its batches, in order, with their stamps intact. Two live batches sharing a slot,
// or a slot rewritten while leased, would show as a wrong stamp.
TEST(BatchRingTest, ThreadedWritersNeverShareASlotOrOverwriteALease) {
  for (const bool whole : {true, false}) {
    const std::int64_t batch = 6;
    BatchRing ring(shape(6, 4, batch, 60, whole));
    const std::size_t stride = 8;  // bytes per sample
    std::vector<std::thread> writers;
    for (int w = 0; w < 4; ++w) {
      writers.emplace_back([&] {
        while (const auto c = ring.claim()) {
          ring.open(*c);
          for (std::int64_t k = c->first; k < c->last; ++k) {
            std::memset(ring.images(c->slot) + k * stride,
                        static_cast<int>(c->batch.sequence % 251), stride);
            ring.labels(c->slot)[k] = c->batch.sequence;
          }
          ring.finish(*c);
        }
      });
    }
    auto intact = [&](const RingLease& lease) {
      for (std::int64_t k = 0; k < lease.batch.count; ++k) {
        const std::uint8_t* sample = ring.images(lease.slot) + k * stride;
        if (ring.labels(lease.slot)[k] != lease.batch.sequence) return false;
        if (sample[0] != lease.batch.sequence % 251) return false;
        if (sample[stride - 1] != lease.batch.sequence % 251) return false;
      }
      return true;
    };
    std::mt19937 rng(1);
    std::vector<RingLease> held;
    for (std::int64_t seq = 0; seq < 400; ++seq) {
      if (seq == 150) ring.reset();  // abandoned batches must not leak into the new traversal
      const RingLease lease = ring.acquire();
      ASSERT_EQ(lease.batch.sequence, seq);
      ASSERT_TRUE(intact(lease)) << "batch " << seq << " (whole batches: " << whole << ")";
      held.push_back(lease);
      if (held.size() > 2 || rng() % 2) {
        // Still intact after the writers ran on: nobody wrote into a leased slot.
        ASSERT_TRUE(intact(held.front())) << "batch " << held.front().batch.sequence;
        ring.release(held.front().slot, nullptr);
        held.erase(held.begin());
      }
    }
    ring.stop();
    for (auto& t : writers) t.join();
  }
}

}  // namespace
}  // namespace data_pipeline
