// Tests for the GPU decode stage as an input source on its own: in a build without the stage, a
// usage error naming the flag; on a GPU, the stage's batches on the step's stream, released behind
// the step's work, with their counters, notices, reset and cancel.
#include "lib/input/gpu_decode_input.h"

#include <gtest/gtest.h>

#include <cmath>

#include "data_pipeline/data_error.h"
#include "lib/core/build_features.h"
#include "lib/core/usage_error.h"
#include "lib/device/cuda_device.h"
#include "tests/support/test_util.h"

namespace workload {
namespace {

namespace dp = data_pipeline;

class GpuDecodeInputTest : public ::testing::Test {
 protected:
  void SetUp() override { index_ = test_util::small_training_set().index; }
  static dp::LoaderOptions options() {
    dp::LoaderOptions o;
    o.batch_size = 4;
    o.workers = 2;
    o.transform.image_size = 32;
    o.decode = dp::DecodeDevice::kGpu;
    return o;
  }
  std::shared_ptr<const dp::Food101Index> index_;  // 24 training images
};

TEST_F(GpuDecodeInputTest, ABuildWithoutTheStageRefusesNamingTheFlag) {
  if (built(Feature::kGpuDecode)) GTEST_SKIP() << "this build has the stage";
  std::vector<std::string> notices;
  try {
    make_gpu_decode_input(index_, options(), torch::kCPU, notices);
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--decode gpu: this build has no GPU decode stage (", 0),
              0u)
        << e.what();
  }
}

TEST_F(GpuDecodeInputTest, TheStagesBatchesReachTheStepsStreamAndAreReleasedBehindIt) {
  if (!built(Feature::kGpuDecode)) GTEST_SKIP() << "this build has no GPU decode stage";
  if (!cuda_available()) GTEST_SKIP() << "needs a CUDA device";
  StepStream stream(true);
  std::vector<std::string> notices;
  dp::LoaderOptions o = options();
  o.pin_memory = false;  // ignored, with a notice: the stage's ring is always page-locked
  auto input = make_gpu_decode_input(index_, o, torch::Device(torch::kCUDA, 0), notices);
  ASSERT_TRUE(input->gpu_decode().has_value());
  const GpuDecodeSummary first = *input->gpu_decode();
  bool told_pinning = false;
  for (const auto& n : notices) told_pinning |= n.rfind("--pin-memory=false: ignored", 0) == 0;
  EXPECT_TRUE(told_pinning);
  ASSERT_TRUE(input->host_ring().has_value());
  EXPECT_TRUE(input->host_ring()->pinned);
  // The CPU loader's order and digests (the stage digests what it was given), for more steps than
  // the stage has output buffers: each must come back after the step's work.
  dp::LoaderOptions cpu = o;
  dp::Loader staged(index_, cpu);  // the same staging the stage's loader does
  for (int i = 0; i < 16; ++i) {
    input->next();
    const dp::Batch want = staged.next();
    EXPECT_EQ(input->info().digest(), want.digest()) << "batch " << i;
    const StepInputs in = input->submit();
    EXPECT_TRUE(in.images.is_cuda());
    EXPECT_EQ(in.images.sizes(), (std::vector<std::int64_t>{4, 3, 32, 32}));
    EXPECT_TRUE(in.images.is_contiguous(torch::MemoryFormat::ChannelsLast));
    // Read on the step's stream, which waits for the stage's event.
    EXPECT_TRUE(std::isfinite(in.images.abs().sum().item<float>()));
    EXPECT_TRUE(in.labels.cpu().equal(want.labels()));
    input->release_after_step();
  }
  const GpuDecodeSummary after = *input->gpu_decode();
  EXPECT_GE(after.stats.batches, 16);
  EXPECT_EQ(after.info.hardware, first.info.hardware);
  input->reset();
  input->next();
  EXPECT_EQ(input->info().index_in_epoch(), 0);
  EXPECT_EQ(input->info().epoch(), 3);  // 16 batches of 6 an epoch: the last taken was epoch 2
  input->submit();
  input->release_after_step();
  input->cancel();
  EXPECT_THROW(input->next(), dp::Cancelled);
  input->stop();
}

}  // namespace
}  // namespace workload
