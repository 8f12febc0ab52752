// Tests for lib/cuda_device's process-level setting: the hardware-queue count set before CUDA
// starts, and only where the user has not set it.
#include "lib/cuda_device.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace workload {
namespace {

constexpr const char* kVar = "CUDA_DEVICE_MAX_CONNECTIONS";

std::string value() {
  const char* v = std::getenv(kVar);
  return v ? v : "(unset)";
}

// One sequence, since what the function records is process-wide.
TEST(CudaDeviceTest, ConnectionsAreSetOnlyWhereTheUserHasNot) {
  ASSERT_EQ(unsetenv(kVar), 0);
  EXPECT_FALSE(default_cuda_connections(0));  // nothing asked
  EXPECT_EQ(value(), "(unset)");
  EXPECT_FALSE(cuda_connections_set_here());

  ASSERT_EQ(setenv(kVar, "4", 1), 0);  // the user's value stays, even below what is asked
  EXPECT_FALSE(default_cuda_connections(32));
  EXPECT_EQ(value(), "4");
  EXPECT_FALSE(cuda_connections_set_here());

  ASSERT_EQ(unsetenv(kVar), 0);
  EXPECT_TRUE(default_cuda_connections(32));
  EXPECT_EQ(value(), "32");
  EXPECT_TRUE(cuda_connections_set_here());

  EXPECT_FALSE(default_cuda_connections(16));  // set once; a second call changes nothing
  EXPECT_EQ(value(), "32");
  ASSERT_EQ(unsetenv(kVar), 0);
}

}  // namespace
}  // namespace workload
