// Tests for CUDA_DEVICE_MAX_CONNECTIONS's one unit: which runs want more queues, the request read
// from argv before parsing (which starts CUDA), the variable set only where the user has not, what
// the report says of it, and the notice when the user's value is smaller.
#include "lib/device/cuda_connections.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace workload {
namespace {

std::string value() {
  const char* v = std::getenv(kCudaConnectionsVariable);
  return v ? v : "(unset)";
}

TEST(CudaConnectionsTest, OnlyTheGpuDecodeStageOnACudaDeviceWantsMoreQueues) {
  EXPECT_EQ(cuda_connections_for(true, true), kGpuDecodeCudaConnections);
  EXPECT_EQ(kGpuDecodeCudaConnections, 32);
  EXPECT_EQ(cuda_connections_for(true, false), 0);
  EXPECT_EQ(cuda_connections_for(false, true), 0);
}

// Either spelling asks; the last --decode wins; nothing after `--` counts.
TEST(CudaConnectionsTest, TheRequestIsReadFromArgvBeforeParsing) {
  auto connections = [](std::vector<std::string> args) {
    args.insert(args.begin(), "train_resnet50");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    return cuda_connections_for_args(static_cast<int>(argv.size()), argv.data());
  };
  EXPECT_EQ(connections({}), 0);
  EXPECT_EQ(connections({"--data", "/d", "--workers", "4"}), 0);
  EXPECT_EQ(connections({"--data", "/d", "--decode", "gpu"}), 32);
  EXPECT_EQ(connections({"--decode=gpu", "--steps", "4"}), 32);
  EXPECT_EQ(connections({"--decode", "cpu"}), 0);
  EXPECT_EQ(connections({"--decode=gpu", "--decode", "cpu"}), 0);
  EXPECT_EQ(connections({"--decode", "cpu", "--decode=gpu"}), 32);
  EXPECT_EQ(connections({"--decode"}), 0);  // missing value: the parser's error, no queues
  EXPECT_EQ(connections({"--decoder=gpu"}), 0);
  EXPECT_EQ(connections({"--", "--decode=gpu"}), 0);
}

// One sequence, since what the unit records is process-wide.
TEST(CudaConnectionsTest, TheVariableIsSetOnlyWhereTheUserHasNotAndTheReportSaysWho) {
  ASSERT_EQ(unsetenv(kCudaConnectionsVariable), 0);
  EXPECT_FALSE(default_cuda_connections(0));  // nothing asked
  EXPECT_EQ(value(), "(unset)");
  EXPECT_FALSE(current_cuda_connections().value);
  EXPECT_EQ(current_cuda_connections().from, "");

  ASSERT_EQ(setenv(kCudaConnectionsVariable, "4", 1), 0);  // the user's value stays, even below
  EXPECT_FALSE(default_cuda_connections(32));
  EXPECT_EQ(value(), "4");
  EXPECT_EQ(current_cuda_connections().value, std::optional<std::string>("4"));
  EXPECT_EQ(current_cuda_connections().from, "environment");

  ASSERT_EQ(unsetenv(kCudaConnectionsVariable), 0);
  EXPECT_TRUE(default_cuda_connections(32));
  EXPECT_EQ(value(), "32");
  EXPECT_EQ(current_cuda_connections().from, "program");

  EXPECT_FALSE(default_cuda_connections(16));  // set once; a second call changes nothing
  EXPECT_EQ(value(), "32");
  ASSERT_EQ(unsetenv(kCudaConnectionsVariable), 0);
}

// A notice when the environment gives fewer queues than wanted (unset, a lower or an unreadable
// value), none when it gives enough or nothing is wanted.
TEST(CudaConnectionsTest, ANoticeSaysWhenTheEnvironmentGivesFewer) {
  EXPECT_EQ(cuda_connections_notice(0, std::nullopt), "");
  const std::string unset = cuda_connections_notice(32, std::nullopt);
  EXPECT_EQ(
      unset.rfind("--decode gpu: CUDA_DEVICE_MAX_CONNECTIONS is unset (CUDA's default, 8)", 0), 0u)
      << unset;
  EXPECT_NE(unset.find("with 32 (what train_resnet50 sets when the variable is unset)"),
            std::string::npos)
      << unset;
  EXPECT_NE(cuda_connections_notice(32, "8").find("CUDA_DEVICE_MAX_CONNECTIONS is '8'"),
            std::string::npos);
  EXPECT_NE(cuda_connections_notice(32, "lots"), "");
  EXPECT_EQ(cuda_connections_notice(32, "32"), "");
  EXPECT_EQ(cuda_connections_notice(32, "64"), "");
}

}  // namespace
}  // namespace workload
