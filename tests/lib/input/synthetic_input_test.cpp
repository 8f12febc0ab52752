// Tests for SyntheticInput on its own: one batch drawn from seed + 1, the same tensors every step
// (persistent), a digest that follows its bytes, and the layout and dtype the options ask for.
#include "lib/input/synthetic_input.h"

#include <gtest/gtest.h>

namespace workload {
namespace {

namespace dp = data_pipeline;

dp::LoaderOptions options() {
  dp::LoaderOptions o;
  o.batch_size = 4;
  o.transform.image_size = 16;
  return o;
}

TEST(SyntheticInputTest, TheSameBatchEveryStepWithoutWaiting) {
  SyntheticInput input(options(), 101, torch::kCPU);
  EXPECT_FALSE(input.host_ring().has_value());
  EXPECT_FALSE(input.gpu_decode().has_value());
  input.next();
  const StepInputs a = input.submit();
  input.release_after_step();
  input.next();
  const StepInputs b = input.submit();
  EXPECT_TRUE(a.persistent);
  EXPECT_TRUE(a.images.is_same(b.images));
  EXPECT_TRUE(a.labels.is_same(b.labels));
  EXPECT_EQ(a.images.sizes(), (std::vector<std::int64_t>{4, 3, 16, 16}));
  EXPECT_TRUE(a.images.is_contiguous(torch::MemoryFormat::ChannelsLast));
  EXPECT_EQ(a.images.scalar_type(), torch::kFloat32);
  EXPECT_GE(a.labels.min().item<std::int64_t>(), 0);
  EXPECT_LT(a.labels.max().item<std::int64_t>(), 101);
  EXPECT_EQ(input.info().size(), 4);
  EXPECT_EQ(input.info().epoch(), 0);
}

TEST(SyntheticInputTest, TheDigestFollowsTheSeedAndTheBytes) {
  const SyntheticInput a(options(), 101, torch::kCPU), b(options(), 101, torch::kCPU);
  EXPECT_EQ(a.info().digest(), b.info().digest());  // seed + 1, whatever ran before
  dp::LoaderOptions o = options();
  o.seed += 1;
  EXPECT_NE(SyntheticInput(o, 101, torch::kCPU).info().digest(), a.info().digest());
  o = options();
  o.transform.dtype = dp::HostDType::kUInt8;
  SyntheticInput bytes(o, 101, torch::kCPU);
  EXPECT_NE(bytes.info().digest(), a.info().digest());
  EXPECT_EQ(bytes.submit().images.scalar_type(), torch::kUInt8);
}

TEST(SyntheticInputTest, NchwHoldsTheSameValuesContiguous) {
  dp::LoaderOptions o = options();
  SyntheticInput channels_last(o, 101, torch::kCPU);
  o.transform.layout = dp::ImageLayout::kNchw;
  SyntheticInput nchw(o, 101, torch::kCPU);
  EXPECT_TRUE(nchw.submit().images.is_contiguous());
  EXPECT_TRUE(nchw.submit().images.equal(channels_last.submit().images));
  EXPECT_TRUE(nchw.submit().labels.equal(channels_last.submit().labels));
}

}  // namespace
}  // namespace workload
