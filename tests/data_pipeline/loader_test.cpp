// Tests for Loader: determinism across settings, ordering, epochs, reset, failures, fences,
// shutdown (bounded, with a worker stuck in a read), FIFOs in the dataset.
#include "data_pipeline/loader.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include "data_pipeline/data_error.h"
#include "data_pipeline/host_block.h"
#include "tests/support/test_util.h"

namespace data_pipeline {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::vector<std::string> thread_names() {
  std::vector<std::string> names;
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return names;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    names.push_back(name);
  }
  closedir(dir);
  return names;
}

// One delivered batch, copied out of the ring.
struct Seen {
  std::int64_t epoch;
  std::int64_t index;
  std::uint64_t digest;
  torch::Tensor images;
  torch::Tensor labels;
};

class LoaderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new test_util::TempDir();
    test_util::make_dataset(tmp_->path(), 3, 12, 7, 0.0);  // 36 training images
  }
  static void TearDownTestSuite() { delete tmp_; }

  static std::shared_ptr<const Food101Index> index() {
    return std::make_shared<const Food101Index>(Food101Index::load(tmp_->path(), "train"));
  }
  static LoaderOptions base(int workers, std::int64_t batch = 5) {
    LoaderOptions o;
    o.batch_size = batch;
    o.workers = workers;
    o.prefetch_factor = 2;
    o.pin_memory = false;
    o.seed = 11;
    o.transform.image_size = 24;
    return o;
  }
  // Runs `n` batches, calling reset() before the batches listed in `resets_before`.
  static std::vector<Seen> run(const LoaderOptions& o, int n,
                               const std::vector<int>& resets_before = {},
                               std::shared_ptr<const Food101Index> idx = nullptr) {
    Loader loader(idx ? idx : index(), o);
    std::vector<Seen> out;
    for (int i = 0; i < n; ++i) {
      if (std::find(resets_before.begin(), resets_before.end(), i) != resets_before.end()) {
        loader.reset();
      }
      Batch b = loader.next();
      out.push_back(
          {b.epoch(), b.index_in_epoch(), b.digest(), b.images().clone(), b.labels().clone()});
    }
    return out;
  }
  static void expect_same(const std::vector<Seen>& a, const std::vector<Seen>& b,
                          const std::string& what) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].epoch, b[i].epoch) << what << " batch " << i;
      EXPECT_EQ(a[i].index, b[i].index) << what << " batch " << i;
      EXPECT_EQ(a[i].digest, b[i].digest) << what << " batch " << i;
      EXPECT_TRUE(torch::equal(a[i].images, b[i].images)) << what << " batch " << i;
      EXPECT_TRUE(torch::equal(a[i].labels, b[i].labels)) << what << " batch " << i;
    }
  }
  static test_util::TempDir* tmp_;
};
test_util::TempDir* LoaderTest::tmp_ = nullptr;

TEST_F(LoaderTest, BatchesAreIdenticalWhateverWorkersPrefetchPinningOrWorkUnit) {
  // 16 batches of 5 from 36 images: 7 batches an epoch, so two roll-overs are included.
  const auto reference = run(base(0), 16);
  for (int workers : {1, 3}) {
    for (int prefetch : {1, 4}) {
      for (bool pin : {false, true}) {
        for (WorkUnit unit : {WorkUnit::kBatch, WorkUnit::kSample}) {
          LoaderOptions o = base(workers);
          o.prefetch_factor = prefetch;
          o.pin_memory = pin;
          o.work_unit = unit;
          expect_same(reference, run(o, 16),
                      "workers=" + std::to_string(workers) +
                          " prefetch=" + std::to_string(prefetch) + " pin=" + std::to_string(pin) +
                          " unit=" + common::to_string(unit));
        }
      }
    }
  }
}

TEST_F(LoaderTest, ResetsAreDeterministicToo) {
  const auto reference = run(base(0), 12, {3, 4, 9});
  LoaderOptions o = base(3);
  o.work_unit = WorkUnit::kSample;
  expect_same(reference, run(o, 12, {3, 4, 9}), "sample unit with resets");
  expect_same(reference, run(base(2), 12, {3, 4, 9}), "batch unit with resets");
}

TEST_F(LoaderTest, StagedBatchesForTheGpuAreIdenticalWhateverTheSettings) {
  // --decode gpu: each batch carries the files' bytes, crops and flips; the digest covers them.
  struct Staged {
    std::uint64_t digest;
    std::vector<std::int64_t> labels;
    std::vector<CropRect> crops;
    std::vector<bool> flips;
    std::vector<std::size_t> sizes;
  };
  auto staged_run = [&](LoaderOptions o) {
    o.decode = DecodeDevice::kGpu;
    Loader loader(index(), o);
    std::vector<Staged> out;
    for (int i = 0; i < 10; ++i) {
      Batch b = loader.next();
      Staged s{b.digest(), {}, {}, {}, {}};
      EXPECT_EQ(static_cast<std::int64_t>(b.staged().size()), b.size());
      for (std::int64_t k = 0; k < b.size(); ++k) {
        const StagedImage& st = b.staged()[static_cast<std::size_t>(k)];
        EXPECT_EQ(st.route, DecodeRoute::kHardware) << st.reason;
        // The staged bytes are the file's.
        const auto file = test_util::read_bytes((*index())[st.source_index].path);
        EXPECT_EQ(st.size, file.size());
        EXPECT_EQ(std::memcmp(st.bytes(b.sample_area(k)), file.data(), file.size()), 0);
        s.labels.push_back(b.labels()[k].item<std::int64_t>());
        s.crops.push_back(st.params.crop);
        s.flips.push_back(st.params.flip);
        s.sizes.push_back(st.size);
      }
      out.push_back(std::move(s));
    }
    return out;
  };
  LoaderOptions roomy = base(0);
  roomy.transform.image_size = 224;  // files fit in the sample areas (no overflow buffers)
  const auto reference = staged_run(base(0));
  for (const LoaderOptions& o : {base(1), base(3), roomy}) {
    for (WorkUnit unit : {WorkUnit::kBatch, WorkUnit::kSample}) {
      LoaderOptions v = o;
      v.work_unit = unit;
      const auto got = staged_run(v);
      ASSERT_EQ(got.size(), reference.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].digest, reference[i].digest) << "batch " << i;
        EXPECT_EQ(got[i].labels, reference[i].labels);
        EXPECT_EQ(got[i].crops, reference[i].crops);
        EXPECT_EQ(got[i].flips, reference[i].flips);
        EXPECT_EQ(got[i].sizes, reference[i].sizes);
      }
    }
  }
  // A CPU loader's batches carry nothing staged.
  Loader cpu(index(), base(1));
  EXPECT_TRUE(cpu.next().staged().empty());
}

TEST_F(LoaderTest, NchwBatchesAreTheChannelsLastOnesInAnotherLayout) {
  LoaderOptions chw = base(2);
  chw.transform.layout = ImageLayout::kNchw;
  Loader a(index(), base(2)), b(index(), chw);
  for (int i = 0; i < 3; ++i) {
    Batch x = a.next(), y = b.next();
    EXPECT_TRUE(x.images().is_contiguous(torch::MemoryFormat::ChannelsLast));
    EXPECT_TRUE(y.images().is_contiguous());
    EXPECT_EQ(x.images().sizes(), y.images().sizes());
    EXPECT_TRUE(torch::equal(x.images(), y.images())) << "batch " << i;
    EXPECT_TRUE(torch::equal(x.labels(), y.labels()));
  }
}

TEST_F(LoaderTest, ResetToStartsTheGivenEpoch) {
  Loader loader(index(), base(2));
  loader.next();
  loader.reset_to(5);
  Batch b = loader.next();
  EXPECT_EQ(b.epoch(), 5);
  EXPECT_EQ(b.index_in_epoch(), 0);
  const auto fresh = run(base(0), 36 / 5 * 5 + 1);  // the first batch of epoch 5
  EXPECT_EQ(b.digest(), fresh.back().digest);
  EXPECT_THROW(loader.reset_to(-1), std::invalid_argument);
}

TEST_F(LoaderTest, DeliversInOrderAndRollsOverEpochs) {
  LoaderOptions o = base(3, 6);  // 36 / 6: every image exactly once per epoch
  Loader loader(index(), o);
  EXPECT_EQ(loader.batches_per_epoch(), 6);
  std::map<std::int64_t, std::vector<int>> label_counts;
  std::vector<std::uint64_t> digests;
  for (int i = 0; i < 18; ++i) {
    Batch b = loader.next();
    EXPECT_EQ(b.sequence(), i);
    EXPECT_EQ(b.epoch(), i / 6);
    EXPECT_EQ(b.index_in_epoch(), i % 6);
    EXPECT_EQ(b.size(), 6);
    auto& counts = label_counts[b.epoch()];
    counts.resize(3);
    for (int k = 0; k < 6; ++k) ++counts[static_cast<size_t>(b.labels()[k].item<std::int64_t>())];
    digests.push_back(b.digest());
  }
  for (const auto& [epoch, counts] : label_counts) {
    EXPECT_EQ(counts, (std::vector<int>{12, 12, 12})) << "epoch " << epoch;
  }
  // A new permutation (and new augmentations) each epoch.
  EXPECT_NE(digests[0], digests[6]);
  EXPECT_NE(digests[6], digests[12]);
}

TEST_F(LoaderTest, WithoutShuffleTheSplitOrderIsKept) {
  LoaderOptions o = base(2, 12);
  o.shuffle = false;
  Loader loader(index(), o);
  for (int i = 0; i < 3; ++i) {
    Batch b = loader.next();
    for (int k = 0; k < 12; ++k) EXPECT_EQ(b.labels()[k].item<std::int64_t>(), i);
  }
}

TEST_F(LoaderTest, LastPartialBatchWithoutDropLast) {
  LoaderOptions o = base(2, 10);
  o.drop_last = false;
  Loader loader(index(), o);
  EXPECT_EQ(loader.batches_per_epoch(), 4);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(loader.next().size(), 10);
  Batch last = loader.next();
  EXPECT_EQ(last.size(), 6);
  EXPECT_EQ(last.images().size(0), 6);
  EXPECT_EQ(loader.next().epoch(), 1);
}

// Every image of two epochs, in delivery order: its dataset index and its pixels.
struct Sample {
  std::int64_t epoch;
  std::int64_t index;
  torch::Tensor pixels;
};
std::vector<Sample> samples_of(Loader& loader, int epochs) {
  std::vector<Sample> out;
  while (true) {
    Batch b = loader.next();
    if (b.epoch() >= epochs) break;
    EXPECT_EQ(b.indices().size(), static_cast<std::size_t>(b.size()));
    for (std::int64_t k = 0; k < b.size(); ++k) {
      out.push_back({b.epoch(), b.indices()[static_cast<std::size_t>(k)], b.images()[k].clone()});
    }
  }
  return out;
}

TEST_F(LoaderTest, ShardsFollowDistributedSamplersFormula) {
  // The whole split's order (one shard), then shards of 2, 3, 5 and 7 ranks (36 images: 5 and 7
  // do not divide it, so the order is padded with its head).
  LoaderOptions whole = base(2, 4);
  whole.drop_last = false;
  Loader reference(index(), whole);
  const auto all = samples_of(reference, 2);
  ASSERT_EQ(all.size(), 72u);
  const std::int64_t n = 36;
  for (const int world : {2, 3, 5, 7}) {
    const std::int64_t shard = (n + world - 1) / world;
    std::vector<std::int64_t> seen_in_epoch0;
    for (int rank = 0; rank < world; ++rank) {
      LoaderOptions o = whole;
      o.shard_count = world;
      o.shard_index = rank;
      o.workers = rank % 3;  // the loader settings do not matter
      Loader loader(index(), o);
      EXPECT_EQ(loader.batches_per_epoch(), (shard + 3) / 4);
      const auto mine = samples_of(loader, 2);
      ASSERT_EQ(mine.size(), static_cast<std::size_t>(2 * shard)) << world << " ranks";
      for (std::size_t i = 0; i < mine.size(); ++i) {
        const std::int64_t e = mine[i].epoch;
        const std::int64_t j = static_cast<std::int64_t>(i) - e * shard;
        // padded[rank + j * world], padded[p] = order[p mod n]
        const auto& want = all[static_cast<std::size_t>(e * n + (rank + j * world) % n)];
        ASSERT_EQ(mine[i].index, want.index)
            << world << " ranks, rank " << rank << ", sample " << i;
        // Augmentations stay keyed by (seed, epoch, image): the same pixels as in the whole split.
        ASSERT_TRUE(torch::equal(mine[i].pixels, want.pixels)) << world << " ranks, rank " << rank;
        if (e == 0) seen_in_epoch0.push_back(mine[i].index);
      }
    }
    // Together the ranks read every image, plus the padding's repeats of the order's head.
    std::sort(seen_in_epoch0.begin(), seen_in_epoch0.end());
    std::vector<std::int64_t> expected;
    for (std::int64_t p = 0; p < shard * world; ++p) expected.push_back(all[p % n].index);
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(seen_in_epoch0, expected) << world << " ranks";
  }
}

TEST_F(LoaderTest, UnpaddedShardsReadEveryImageOnceAsTheEvaluationNeeds) {
  LoaderOptions whole = base(2, 4);
  whole.drop_last = false;
  whole.shuffle = false;
  whole.pad_shards = false;
  const std::int64_t n = 36;
  for (const int world : {1, 5, 7}) {
    std::vector<std::int64_t> seen;
    for (int rank = 0; rank < world; ++rank) {
      LoaderOptions o = whole;
      o.shard_count = world;
      o.shard_index = rank;
      Loader loader(index(), o);
      const std::int64_t size = unpadded_shard_size(n, world, rank);
      EXPECT_EQ(size, (n - rank + world - 1) / world);
      EXPECT_EQ(loader.batches_per_epoch(), (size + 3) / 4);
      const auto mine = samples_of(loader, 1);
      ASSERT_EQ(mine.size(), static_cast<std::size_t>(size)) << world << " ranks, rank " << rank;
      for (std::size_t j = 0; j < mine.size(); ++j) {
        // Without shuffle the order is the split's: rank + j * world.
        EXPECT_EQ(mine[j].index, rank + static_cast<std::int64_t>(j) * world);
        seen.push_back(mine[j].index);
      }
    }
    std::sort(seen.begin(), seen.end());
    std::vector<std::int64_t> every(n);
    std::iota(every.begin(), every.end(), std::int64_t{0});
    EXPECT_EQ(seen, every) << world << " ranks: every image exactly once";
  }
  // More ranks than images: a rank with none is a DataError naming the split.
  LoaderOptions o = whole;
  o.shard_count = 40;
  o.shard_index = 37;
  try {
    Loader loader(index(), o);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("0 in shard 37 of 40"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("none for this shard"), std::string::npos) << e.what();
  }
}

TEST_F(LoaderTest, AShardSmallerThanABatchIsADataError) {
  LoaderOptions o = base(1, 10);
  o.shard_count = 4;  // 9 images a shard
  try {
    Loader loader(index(), o);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("9 in each of 4 shards"), std::string::npos) << e.what();
  }
  o.shard_index = 4;
  EXPECT_THROW(Loader(index(), o), std::invalid_argument);
}

TEST_F(LoaderTest, ResetStartsANewEpochAndMatchesAFreshTraversal) {
  const auto straight = run(base(2), 8);  // batch 7 is epoch 1, index 0
  Loader loader(index(), base(3));
  loader.next();
  loader.next();
  loader.reset();
  Batch b = loader.next();
  EXPECT_EQ(b.epoch(), 1);
  EXPECT_EQ(b.index_in_epoch(), 0);
  EXPECT_EQ(b.digest(), straight[7].digest);
  b.release();
  loader.reset();  // nothing consumed in this traversal... but one batch was
  EXPECT_EQ(loader.next().epoch(), 2);
  loader.reset();
  loader.reset();  // an untouched traversal still uses up its epoch, as iter() would
  EXPECT_EQ(loader.next().epoch(), 4);
}

TEST_F(LoaderTest, TensorsAreChannelsLastViewsOfTheRing) {
  Loader loader(index(), base(1));
  Batch b = loader.next();
  EXPECT_EQ(b.images().sizes(), (std::vector<std::int64_t>{5, 3, 24, 24}));
  EXPECT_EQ(b.images().scalar_type(), torch::kFloat32);
  EXPECT_TRUE(b.images().is_contiguous(torch::MemoryFormat::ChannelsLast));
  EXPECT_EQ(b.labels().scalar_type(), torch::kInt64);
  EXPECT_EQ(loader.ring_slots(), 1u * 2 + 2);
  LoaderOptions u = base(1);
  u.transform.dtype = HostDType::kUInt8;
  Loader loader8(index(), u);
  EXPECT_EQ(loader8.next().images().scalar_type(), torch::kUInt8);
}

TEST_F(LoaderTest, TheRingIsPinnedExactlyWhenAskedAndPossible) {
  for (const bool pin : {false, true}) {
    LoaderOptions o = base(1);
    o.pin_memory = pin;
    Loader loader(index(), o);
    EXPECT_EQ(loader.pinned(), pin && HostBlock::page_locking_available()) << "pin " << pin;
    EXPECT_GE(loader.ring_bytes(), 4u * 5 * 24 * 24 * 3 * 4);
  }
}

TEST_F(LoaderTest, ABatchMayOutliveItsLoader) {
  for (const int workers : {0, 2}) {
    auto loader = std::make_unique<Loader>(index(), base(workers));
    Batch held = loader->next();
    const torch::Tensor images = held.images().clone();
    const torch::Tensor labels = held.labels().clone();
    Batch second = loader->next();
    loader = nullptr;  // the workers are joined; the ring stays while the batches hold it
    EXPECT_TRUE(held.valid());
    EXPECT_TRUE(torch::equal(held.images(), images));
    EXPECT_TRUE(torch::equal(held.labels(), labels));
    bool fenced = false;
    held.release_after([&] { fenced = true; });
    EXPECT_FALSE(held.valid());
    EXPECT_FALSE(fenced);  // nobody rewrites the slot any more...
    second = Batch();      // ...and the last holder frees the ring, after waiting its fences
    EXPECT_TRUE(fenced) << "workers " << workers;
  }
}

TEST_F(LoaderTest, ConsumerWaitIsMeasured) {
  Loader loader(index(), base(0));
  Batch b = loader.next();
  EXPECT_GT(b.wait().count(), 0);  // workers=0: the decode happens inside next()
  b.release();
  loader.next();
  const auto s = loader.stats();
  EXPECT_EQ(s.batches_delivered, 2);
  EXPECT_EQ(s.samples_decoded, 10);
  EXPECT_GE(s.consumer_wait.count(), b.wait().count());
}

TEST_F(LoaderTest, FenceIsWaitedBeforeTheSlotIsRewritten) {
  LoaderOptions o = base(1);
  o.prefetch_factor = 1;  // ring of 3 slots: batch 3 reuses batch 0's slot
  Loader loader(index(), o);
  Batch first = loader.next();
  const auto* ptr = static_cast<const std::uint8_t*>(first.images().data_ptr());
  const std::size_t bytes = static_cast<std::size_t>(first.images().numel()) * 4;
  std::vector<std::uint8_t> copy(ptr, ptr + bytes);
  std::atomic<int> calls{0};
  std::atomic<bool> intact_during_fence{false};
  std::thread::id fence_thread;
  first.release_after([&] {
    fence_thread = std::this_thread::get_id();
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    intact_during_fence = std::memcmp(ptr, copy.data(), bytes) == 0;
    ++calls;
  });
  for (int i = 0; i < 4; ++i) loader.next();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(intact_during_fence.load());
  EXPECT_NE(fence_thread, std::this_thread::get_id());  // waited on the worker, not here
  EXPECT_NE(std::memcmp(ptr, copy.data(), bytes), 0);   // and the slot was reused afterwards
}

TEST_F(LoaderTest, WorkersAreNamedAndJoinedOnDestruction) {
  const auto loader_threads = [](const std::vector<std::string>& names) {
    return std::count_if(names.begin(), names.end(),
                         [](const auto& n) { return n.rfind("loader/", 0) == 0; });
  };
  const auto before_names = thread_names();
  const auto before = before_names.size();
  {
    LoaderOptions o = base(3);
    o.prefetch_factor = 4;
    Loader loader(index(), o);
    loader.next();  // workers have started and named themselves by the time a batch exists
    auto names = thread_names();
    for (int i = 0;
         i < 100 && std::count_if(names.begin(), names.end(),
                                  [](const auto& n) { return n.rfind("loader/", 0) == 0; }) < 3;
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      names = thread_names();
    }
    for (const char* n : {"loader/0", "loader/1", "loader/2"}) {
      EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
    }
  }
  // Joined: no loader thread and no thread more than before. (Not exactly as many as before: a
  // thread of an earlier test may still have been ending when they were counted.)
  const auto after = thread_names();
  EXPECT_LE(loader_threads(after), loader_threads(before_names));
  EXPECT_LE(after.size(), before);
}

TEST_F(LoaderTest, DestructionMidEpochIsPrompt) {
  for (int workers : {1, 4}) {
    for (WorkUnit unit : {WorkUnit::kBatch, WorkUnit::kSample}) {
      LoaderOptions o = base(workers, 8);
      o.prefetch_factor = 4;
      o.work_unit = unit;
      auto loader = std::make_unique<Loader>(index(), o);
      loader->next();
      const auto start = Clock::now();
      loader.reset();
      EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.0);
    }
  }
  // Destroyed before any batch was asked for.
  const auto start = Clock::now();
  { Loader loader(index(), base(4)); }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.0);
}

// A FileReader standing for reads on a hung filesystem: every call blocks until release() (or,
// should a regression make the test wait for it, 10 s). The function it hands out shares its
// state: a detached worker may call it after the test's objects are gone.
class StuckRead {
 public:
  FileReader reader() const {
    return [state = state_](const std::string& path, std::vector<std::uint8_t>& buffer,
                            std::uint64_t max_bytes) {
      {
        std::unique_lock<std::mutex> lock(state->mu);
        if (state->entered.empty()) state->entered = path;
        state->cv.notify_all();
        state->cv.wait_for(lock, std::chrono::seconds(10), [&] { return state->released; });
      }
      read_file(path, buffer, max_bytes);
    };
  }
  /// The file of the first call, once it is blocked ("" if none came within 10 s).
  std::string wait_entered() const {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->cv.wait_for(lock, std::chrono::seconds(10), [&] { return !state_->entered.empty(); });
    return state_->entered;
  }
  void release() const {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->released = true;
    }
    state_->cv.notify_all();
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::string entered;
    bool released = false;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

int loader_threads() {
  const auto names = thread_names();
  return static_cast<int>(std::count_if(
      names.begin(), names.end(), [](const std::string& n) { return n.rfind("loader/", 0) == 0; }));
}

TEST_F(LoaderTest, StopDetachesAWorkerStuckInAReadOnceItsBoundIsPast) {
  StuckRead stuck;
  std::string path, warning;
  double stop_seconds = 0, destroy_seconds = 0;
  {
    auto loader = std::make_unique<Loader>(index(), base(1), stuck.reader());
    path = stuck.wait_entered();
    ASSERT_FALSE(path.empty()) << "the worker never read a file";
    testing::internal::CaptureStderr();
    auto start = Clock::now();
    loader->stop(std::chrono::milliseconds(200));
    stop_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    warning = testing::internal::GetCapturedStderr();
    start = Clock::now();
    loader.reset();  // its stop() has no worker left to wait for
    destroy_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  EXPECT_GE(stop_seconds, 0.2);
  EXPECT_LT(stop_seconds, 5.0);
  EXPECT_LT(destroy_seconds, 1.0);
  EXPECT_EQ(warning, "data_pipeline: loader/0 did not stop within 200 ms (reading " + path +
                         "); detached, it exits when that call returns\n");
  // Woken after its Loader is gone, the worker finds the ring and its records alive (ASan would
  // say otherwise), sees its claim abandoned and exits.
  EXPECT_EQ(loader_threads(), 1);
  stuck.release();
  for (int i = 0; i < 1000 && loader_threads() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(loader_threads(), 0);
}

TEST_F(LoaderTest, TheImageSizeCapIsValidated) {
  LoaderOptions o = base(1);
  o.max_image_mb = 0;
  try {
    Loader loader(index(), o);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "max_image_mb: expected in [1, 1024], got 0");
  }
  o.max_image_mb = kMaxImageMbCeiling + 1;
  EXPECT_THROW(Loader(index(), o), std::invalid_argument);
}

TEST_F(LoaderTest, FewerImagesThanOneBatchIsADataError) {
  try {
    Loader loader(index(), base(1, 37));
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("train.txt"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fewer than one batch"), std::string::npos) << e.what();
  }
}

TEST_F(LoaderTest, InvalidOptionsAreRejected) {
  EXPECT_THROW(Loader(index(), base(-1)), std::invalid_argument);
  EXPECT_THROW(Loader(index(), base(1, 0)), std::invalid_argument);
  LoaderOptions o = base(1);
  o.prefetch_factor = 0;
  EXPECT_THROW(Loader(index(), o), std::invalid_argument);
}

// A dataset whose train split holds one truncated JPEG.
class BadImageLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test_util::make_dataset(tmp_.path(), 2, 10, 5, 0.0);
    index_ = std::make_shared<const Food101Index>(Food101Index::load(tmp_.path(), "train"));
    bad_ = (*index_)[7].path;
    auto bytes = test_util::read_bytes(bad_);
    bytes.resize(bytes.size() / 2);
    test_util::write_file(bad_, bytes);
  }
  LoaderOptions options(int workers, BadImagePolicy policy) {
    LoaderOptions o;
    o.batch_size = 4;
    o.workers = workers;
    o.pin_memory = false;
    o.transform.image_size = 16;
    o.on_bad_image = policy;
    return o;
  }
  test_util::TempDir tmp_;
  std::shared_ptr<const Food101Index> index_;
  fs::path bad_;
};

TEST_F(BadImageLoaderTest, WorkerErrorIsRethrownWithThePathAndSticks) {
  for (int workers : {0, 3}) {
    Loader loader(index_, options(workers, BadImagePolicy::kError));
    std::string first;
    try {
      for (int i = 0; i < 10; ++i) loader.next();  // 5 batches an epoch: the bad one is in it
      FAIL() << "expected DataError";
    } catch (const DataError& e) {
      first = e.what();
    }
    EXPECT_NE(first.find(bad_.string()), std::string::npos) << first;
    EXPECT_NE(first.find("truncated"), std::string::npos) << first;
    EXPECT_NE(first.find("epoch 0"), std::string::npos) << first;
    try {
      loader.next();
      FAIL() << "expected the same error again";
    } catch (const DataError& e) {
      EXPECT_EQ(first, e.what());
    }
  }
}

TEST_F(BadImageLoaderTest, SkipReplacesDeterministicallyAndReports) {
  std::vector<std::uint64_t> reference;
  for (int workers : {0, 1, 3}) {
    for (WorkUnit unit : {WorkUnit::kBatch, WorkUnit::kSample}) {
      LoaderOptions o = options(workers, BadImagePolicy::kSkip);
      o.work_unit = unit;
      Loader loader(index_, o);
      std::vector<std::uint64_t> digests;
      int skipped = 0;
      for (int i = 0; i < 10; ++i) {
        Batch b = loader.next();
        digests.push_back(b.digest());
        for (const auto& s : b.skipped()) {
          ++skipped;
          EXPECT_EQ(s.path, bad_.string());
          EXPECT_NE(s.reason.find("truncated"), std::string::npos);
          EXPECT_NE(s.replacement, s.path);
        }
      }
      EXPECT_EQ(skipped, 2);                        // once per epoch
      EXPECT_GE(loader.stats().images_skipped, 2);  // batches decoded ahead count too
      if (reference.empty()) reference = digests;
      EXPECT_EQ(digests, reference) << "workers=" << workers << " unit=" << common::to_string(unit);
    }
  }
}

// Ends the test binary (SIGALRM) if it is still running after `seconds`: a regression that blocks
// in open() fails within a minute, not at CTest's TIMEOUT.
struct HangGuard {
  explicit HangGuard(unsigned seconds) { alarm(seconds); }
  ~HangGuard() { alarm(0); }
};

TEST_F(BadImageLoaderTest, AFifoMidRunIsABadImageAndHangsNothing) {
  const HangGuard guard(60);
  const auto good = test_util::read_bytes((*index_)[6].path);
  const fs::path fifo = tmp_.path() / "fifo";
  for (const DecodeDevice decode : {DecodeDevice::kCpu, DecodeDevice::kGpu}) {
    for (const int workers : {0, 2}) {
      for (const BadImagePolicy policy : {BadImagePolicy::kError, BadImagePolicy::kSkip}) {
        SCOPED_TRACE(std::string("decode ") + common::to_string(decode) + ", workers " +
                     std::to_string(workers) + ", on_bad_image " + common::to_string(policy));
        fs::remove(bad_);
        test_util::write_file(bad_, good);  // a good image until the FIFO replaces it
        LoaderOptions o = options(workers, policy);
        o.decode = decode;
        const auto start = Clock::now();
        auto loader = std::make_unique<Loader>(index_, o);
        loader->next();
        // As after a warm-up; renamed over the image so that no worker finds it missing.
        ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
        fs::rename(fifo, bad_);
        int skipped = 0;
        try {
          for (int i = 0; i < 15; ++i) {  // 5 batches an epoch: the FIFO is read in epoch 2
            Batch b = loader->next();
            for (const auto& s : b.skipped()) {
              if (s.reason.find("got a FIFO") == std::string::npos) continue;
              EXPECT_EQ(s.path, bad_.string());
              ++skipped;
            }
          }
          EXPECT_EQ(policy, BadImagePolicy::kSkip) << "expected a DataError";
          EXPECT_GE(skipped, 1);
        } catch (const DataError& e) {
          EXPECT_EQ(policy, BadImagePolicy::kError) << e.what();
          EXPECT_NE(
              std::string(e.what()).find(bad_.string() + ": expected a regular file, got a FIFO"),
              std::string::npos)
              << e.what();
        }
        loader.reset();
        EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
      }
    }
  }
}

TEST_F(BadImageLoaderTest, FileRemovedMidRunIsABadImage) {
  const fs::path victim = (*index_)[3].path;
  Loader loader(index_, options(2, BadImagePolicy::kSkip));
  loader.next();
  fs::remove(victim);
  int skipped = 0;
  for (int i = 0; i < 12; ++i) {
    Batch b = loader.next();
    for (const auto& s : b.skipped()) skipped += s.path == victim.string();
  }
  EXPECT_GE(skipped, 1);
}

}  // namespace
}  // namespace data_pipeline
