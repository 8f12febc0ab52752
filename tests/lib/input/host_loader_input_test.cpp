// Tests for HostLoaderInput on its own: the loader's batches in order, put on the model's device
// (copied out of the ring on the CPU, by copy stream or current stream on a GPU), its slot released
// for reuse, reset, cancel and the ring's facts.
#include "lib/input/host_loader_input.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "data_pipeline/data_error.h"
#include "lib/device/cuda_device.h"
#include "lib/input/input_source.h"
#include "tests/support/test_util.h"

namespace workload {
namespace {

namespace dp = data_pipeline;

class HostLoaderInputTest : public ::testing::Test {
 protected:
  void SetUp() override { index_ = test_util::small_training_set().index; }
  static dp::LoaderOptions options() {
    dp::LoaderOptions o;
    o.batch_size = 4;
    o.workers = 2;
    o.pin_memory = false;
    o.transform.image_size = 32;
    return o;
  }
  std::shared_ptr<const dp::Food101Index> index_;  // 24 training images
};

TEST_F(HostLoaderInputTest, DeliversTheLoadersBatchesInOrderCopiedOutOfTheRing) {
  HostLoaderInput input(index_, options(), torch::kCPU, /*copy_stream=*/true);
  dp::Loader reference(index_, options());
  for (int i = 0; i < 8; ++i) {  // past the epoch's end (6 batches)
    const dp::Batch want = reference.next();
    input.next();
    EXPECT_EQ(input.info().digest(), want.digest()) << "batch " << i;
    EXPECT_EQ(input.info().epoch(), want.epoch());
    EXPECT_EQ(input.info().index_in_epoch(), want.index_in_epoch());
    const StepInputs in = input.submit();
    EXPECT_FALSE(in.persistent);
    EXPECT_TRUE(in.images.equal(want.images()));
    EXPECT_TRUE(in.labels.equal(want.labels()));
    // A copy: the ring slot is free again and may be rewritten while the step reads these.
    EXPECT_NE(in.images.data_ptr(), want.images().data_ptr());
    EXPECT_TRUE(in.images.is_contiguous(torch::MemoryFormat::ChannelsLast));
  }
}

TEST_F(HostLoaderInputTest, TheRingIsReportedAndEveryBatchReleased) {
  HostLoaderInput input(index_, options(), torch::kCPU, true);
  const std::optional<HostRingFacts> ring = input.host_ring();
  ASSERT_TRUE(ring.has_value());
  EXPECT_EQ(ring->slots, 2u * 2u + 2u);  // workers * prefetch + 2
  EXPECT_GT(ring->bytes, 0u);
  EXPECT_FALSE(ring->pinned);
  EXPECT_EQ(ring->batches_per_epoch, 6);
  // More steps than slots: each submit() must hand its slot back, or the loader would stall.
  for (int i = 0; i < 20; ++i) {
    input.next();
    input.submit();
    input.release_after_step();
  }
}

TEST_F(HostLoaderInputTest, ResetStartsTheNextEpochAndCancelEndsAWait) {
  dp::LoaderOptions o = options();
  o.workers = 0;  // every batch decoded inside next(): nothing ahead
  HostLoaderInput input(index_, o, torch::kCPU, true);
  input.next();
  input.submit();
  EXPECT_EQ(input.info().epoch(), 0);
  input.reset();
  input.next();
  EXPECT_EQ(input.info().epoch(), 1);
  EXPECT_EQ(input.info().index_in_epoch(), 0);
  input.submit();
  input.cancel();
  EXPECT_THROW(input.next(), dp::Cancelled);
  input.stop();
  input.stop();  // idempotent
}

TEST_F(HostLoaderInputTest, OnAGpuTheBatchArrivesOnTheStepsStreamWithEitherCopyPath) {
  if (!cuda_available()) GTEST_SKIP() << "needs a CUDA device";
  dp::LoaderOptions o = options();
  o.pin_memory = true;
  dp::Loader reference(index_, o);
  std::vector<torch::Tensor> want_images, want_labels;  // copies: the leases go back at once
  for (int i = 0; i < 8; ++i) {
    const dp::Batch b = reference.next();
    want_images.push_back(b.images().clone());
    want_labels.push_back(b.labels().clone());
  }
  for (bool copy_stream : {true, false}) {
    StepStream stream(true);
    HostLoaderInput input(index_, o, torch::Device(torch::kCUDA, 0), copy_stream);
    EXPECT_TRUE(input.host_ring()->pinned);
    for (int i = 0; i < 8; ++i) {
      input.next();
      const StepInputs in = input.submit();
      // Read on the step's stream: ordered after the copies without a host wait.
      const torch::Tensor back = in.images.cpu();
      EXPECT_TRUE(back.equal(want_images[i])) << "copy_stream " << copy_stream << " batch " << i;
      EXPECT_TRUE(in.labels.cpu().equal(want_labels[i]));
      input.release_after_step();
    }
  }
}

TEST_F(HostLoaderInputTest, TheFactoryPicksThisSourceAndSaysWhenPinningFailed) {
  TrainConfig c;
  c.data = test_util::small_training_set().dir.path().string();
  c.device = Device::kCpu;
  c.loader = options();
  c.loader.pin_memory = true;  // asked for, on a CPU device: not pinned
  std::vector<std::string> notices;
  const auto source =
      make_input_source({c, index_, torch::kCPU, index_->num_classes(), 1, 0, notices});
  ASSERT_TRUE(source->host_ring().has_value());
  EXPECT_FALSE(source->gpu_decode().has_value());
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0], "pinned memory unavailable (CPU device): batches are in pageable memory");
  EXPECT_EQ(pinning_notice(true, true, true), "");
  EXPECT_EQ(pinning_notice(false, false, true), "");
}

// --decode gpu on a CUDA device wants the stage's hardware queues (lib/device/cuda_connections.h);
// other sources and the CPU want CUDA's default.
TEST(InputSourceTest, OnlyTheGpuDecodeStageOnACudaDeviceWantsMoreQueues) {
  TrainConfig c;
  c.device = Device::kCuda;
  EXPECT_EQ(input_cuda_connections(c), 0);
  c.loader.decode = data_pipeline::DecodeDevice::kGpu;
  EXPECT_EQ(input_cuda_connections(c), 32);
  c.device = Device::kCpu;
  EXPECT_EQ(input_cuda_connections(c), 0);
}

}  // namespace
}  // namespace workload
