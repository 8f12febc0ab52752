// Tests for AutocastGuard and AutocastCacheOff (lib/device/autocast_guard.h): the dtype each scope
// sets, what it restores, what it refuses, and on a GPU the dtype a matrix product comes out in.
#include "lib/device/autocast_guard.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <optional>
#include <stdexcept>

namespace workload {
namespace {

using c10::DeviceType;

TEST(AutocastGuardTest, ADisabledGuardChangesNothing) {
  ASSERT_EQ(autocast_dtype(DeviceType::CPU), std::nullopt);
  {
    const AutocastGuard off(false, DeviceType::CPU, at::kHalf);
    EXPECT_EQ(autocast_dtype(DeviceType::CPU), std::nullopt);
  }
  EXPECT_EQ(autocast_dtype(DeviceType::CPU), std::nullopt);
}

TEST(AutocastGuardTest, EachScopeSetsItsDtypeAndTheOuterOneComesBack) {
  {
    const AutocastGuard outer(true, DeviceType::CPU);  // bfloat16 unless said
    EXPECT_EQ(autocast_dtype(DeviceType::CPU), at::kBFloat16);
    try {
      const AutocastGuard inner(true, DeviceType::CPU, at::kHalf);
      EXPECT_EQ(autocast_dtype(DeviceType::CPU), at::kHalf);
    } catch (const c10::Error&) {
      // LibTorch 1.x's CPU autocast takes bfloat16 only: refused, and the outer scope stands.
    }
    EXPECT_EQ(autocast_dtype(DeviceType::CPU), at::kBFloat16);
    // bfloat16 autocast on the CPU: a matrix product in it comes out in bfloat16.
    const torch::Tensor a = torch::randn({4, 8}), b = torch::randn({8, 2});
    EXPECT_EQ(torch::mm(a, b).scalar_type(), at::kBFloat16);
  }
  EXPECT_EQ(autocast_dtype(DeviceType::CPU), std::nullopt);
  EXPECT_EQ(torch::mm(torch::randn({4, 8}), torch::randn({8, 2})).scalar_type(), at::kFloat);
}

TEST(AutocastGuardTest, AnotherDtypeOrDeviceIsRefusedAndLeavesNothingOn) {
  EXPECT_THROW(AutocastGuard(true, DeviceType::CPU, at::kFloat), std::invalid_argument);
  EXPECT_THROW(AutocastGuard(true, DeviceType::Meta), std::invalid_argument);
  EXPECT_EQ(autocast_dtype(DeviceType::CPU), std::nullopt);
}

TEST(AutocastGuardTest, TheCacheSwitchComesBack) {
  const bool before = at::autocast::is_autocast_cache_enabled();
  {
    const AutocastCacheOff off;
    EXPECT_FALSE(at::autocast::is_autocast_cache_enabled());
  }
  EXPECT_EQ(at::autocast::is_autocast_cache_enabled(), before);
}

// On CUDA, the precision each run asks for: a product under the fp16 scope is float16, under the
// default one bfloat16.
TEST(AutocastGuardTest, OnAGpuAProductComesOutInTheScopesDtype) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  const auto o = torch::TensorOptions().device(torch::kCUDA);
  const torch::Tensor a = torch::randn({16, 32}, o), b = torch::randn({32, 8}, o);
  {
    const AutocastGuard fp16(true, DeviceType::CUDA, at::kHalf);
    EXPECT_EQ(torch::mm(a, b).scalar_type(), at::kHalf);
  }
  {
    const AutocastGuard bf16(true);
    EXPECT_EQ(torch::mm(a, b).scalar_type(), at::kBFloat16);
    {
      const AutocastGuard fp16(true, DeviceType::CUDA, at::kHalf);
      EXPECT_EQ(torch::mm(a, b).scalar_type(), at::kHalf);
    }
    EXPECT_EQ(torch::mm(a, b).scalar_type(), at::kBFloat16);
  }
  EXPECT_EQ(torch::mm(a, b).scalar_type(), at::kFloat);
}

}  // namespace
}  // namespace workload
