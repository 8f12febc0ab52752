// Stress test of the loader for the sanitizer builds: many short epochs, resets, fences, held
// leases, cancellations and destructions with several workers, checked against a serial run.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "data_pipeline/counter_rng.h"
#include "data_pipeline/data_error.h"
#include "data_pipeline/loader.h"
#include "tests/support/test_util.h"

namespace data_pipeline {
namespace {

class LoaderStressTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new test_util::TempDir();
    test_util::make_dataset(tmp_->path(), 2, 5, 4, 0.0);  // 10 images: epochs of 5 batches of 2
    index_ = new std::shared_ptr<const Food101Index>(
        std::make_shared<const Food101Index>(Food101Index::load(tmp_->path(), "train")));
  }
  static void TearDownTestSuite() {
    delete index_;
    delete tmp_;
  }
  static LoaderOptions options(int workers, int prefetch, WorkUnit unit) {
    LoaderOptions o;
    o.batch_size = 2;
    o.workers = workers;
    o.prefetch_factor = prefetch;
    o.work_unit = unit;
    o.pin_memory = false;
    o.seed = 5;
    o.transform.image_size = 16;
    return o;
  }
  static test_util::TempDir* tmp_;
  static std::shared_ptr<const Food101Index>* index_;
};
test_util::TempDir* LoaderStressTest::tmp_ = nullptr;
std::shared_ptr<const Food101Index>* LoaderStressTest::index_ = nullptr;

// One scripted session: `ops` encodes, per step, what the consumer does.
struct Script {
  std::vector<int> ops;  // 0: next + release, 1: next + release_after(fence), 2: reset,
                         // 3: next, hold, next, release both
};

Script make_script(std::uint64_t seed, int length) {
  CounterRng rng(seed, 0, 0, 9);
  Script s;
  for (int i = 0; i < length; ++i) s.ops.push_back(static_cast<int>(rng.below(4)));
  return s;
}

// Runs the script; returns the (epoch, batch, digest) sequence delivered.
std::vector<std::tuple<std::int64_t, std::int64_t, std::uint64_t>> play(Loader& loader,
                                                                        const Script& s) {
  std::vector<std::tuple<std::int64_t, std::int64_t, std::uint64_t>> seen;
  auto take = [&](Batch& b) { seen.emplace_back(b.epoch(), b.index_in_epoch(), b.digest()); };
  for (int op : s.ops) {
    if (op == 2) {
      loader.reset();
      continue;
    }
    Batch a = loader.next();
    take(a);
    if (op == 1) {
      a.release_after([] { std::this_thread::sleep_for(std::chrono::microseconds(200)); });
    } else if (op == 3) {
      Batch b = loader.next();  // two leases at once
      take(b);
      b.release();
    }
  }
  return seen;
}

TEST_F(LoaderStressTest, ScriptedSessionsMatchASerialRun) {
  for (std::uint64_t round = 0; round < 12; ++round) {
    const Script script = make_script(round, 25);
    Loader serial(*index_, options(0, 1, WorkUnit::kBatch));
    const auto expected = play(serial, script);
    const int workers = 1 + static_cast<int>(round % 4);
    const int prefetch = 1 + static_cast<int>(round % 3);
    const WorkUnit unit = round % 2 ? WorkUnit::kSample : WorkUnit::kBatch;
    Loader loader(*index_, options(workers, prefetch, unit));
    EXPECT_EQ(play(loader, script), expected)
        << "round " << round << " workers " << workers << " prefetch " << prefetch;
  }
}

TEST_F(LoaderStressTest, DestructionAndCancellationAtRandomPoints) {
  for (std::uint64_t round = 0; round < 40; ++round) {
    CounterRng rng(round, 1, 2, 3);
    auto loader = std::make_unique<Loader>(
        *index_, options(1 + static_cast<int>(rng.below(4)), 1 + static_cast<int>(rng.below(4)),
                         rng.bernoulli(0.5) ? WorkUnit::kSample : WorkUnit::kBatch));
    const int batches = static_cast<int>(rng.below(6));
    for (int i = 0; i < batches; ++i) {
      if (rng.bernoulli(0.2)) loader->reset();
      loader->next();
    }
    if (rng.bernoulli(0.3)) {
      // Cancel from another thread while the consumer may be waiting.
      std::thread canceller([&] { loader->cancel(); });
      try {
        for (int i = 0; i < 100; ++i) loader->next();
      } catch (const Cancelled&) {
      }
      canceller.join();
      EXPECT_THROW(loader->next(), Cancelled);
    }
    const auto start = std::chrono::steady_clock::now();
    loader = nullptr;  // destroys the loader (not Loader::reset, a new traversal)
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  }
}

}  // namespace
}  // namespace data_pipeline
