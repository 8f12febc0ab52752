// Tests for reading torchrun's environment (every bad value names its variable) and the per-rank
// report names.
#include "lib/distributed/launch_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "lib/config/train_config.h"
#include "lib/core/build_features.h"
#include "lib/core/usage_error.h"

namespace workload {
namespace {

std::optional<LaunchEnv> read(const std::map<std::string, std::string>& vars) {
  return read_launch_env([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::map<std::string, std::string> torchrun(int rank, int world) {
  return {{"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_WORLD_SIZE", std::to_string(world)},
          {"MASTER_ADDR", "localhost"},
          {"MASTER_PORT", "29500"},
          {"TORCHELASTIC_USE_AGENT_STORE", "True"},
          {"TORCHELASTIC_RESTART_COUNT", "2"}};
}

void expect_usage_error(const std::map<std::string, std::string>& vars,
                        const std::string& fragment) {
  try {
    read(vars);
    FAIL() << "expected a usage error mentioning " << fragment;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(DistEnvTest, NoVariablesMeansASingleProcess) {
  EXPECT_FALSE(read({}).has_value());
  EXPECT_FALSE(read({{"MASTER_ADDR", "x"}, {"MASTER_PORT", "1"}}).has_value());
}

TEST(DistEnvTest, TorchrunsVariablesAreRead) {
  const auto d = read(torchrun(1, 2));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->rank, 1);
  EXPECT_EQ(d->world_size, 2);
  EXPECT_EQ(d->local_rank, 1);
  EXPECT_EQ(d->local_world_size, 2);
  EXPECT_EQ(d->master_addr, "localhost");
  EXPECT_EQ(d->master_port, 29500);
  EXPECT_TRUE(d->agent_store);
  EXPECT_EQ(d->restart_count, 2);
  auto plain = torchrun(0, 1);
  plain.erase("TORCHELASTIC_USE_AGENT_STORE");
  plain.erase("TORCHELASTIC_RESTART_COUNT");
  plain.erase("LOCAL_WORLD_SIZE");
  const auto p = read(plain);
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->agent_store);
  EXPECT_EQ(p->restart_count, 0);
  EXPECT_EQ(p->local_world_size, 1);
}

TEST(DistEnvTest, EveryBadVariableIsNamed) {
  expect_usage_error({{"WORLD_SIZE", "2"}}, "RANK: required");
  expect_usage_error({{"RANK", "0"}}, "WORLD_SIZE: required");
  auto v = torchrun(2, 2);
  expect_usage_error(v, "RANK: expected an integer in [0, 1], got '2'");
  v = torchrun(0, 2);
  v["WORLD_SIZE"] = "zero";
  expect_usage_error(v, "WORLD_SIZE: expected an integer");
  v = torchrun(0, 2);
  v["LOCAL_RANK"] = "-1";
  expect_usage_error(v, "LOCAL_RANK: expected an integer in [0, 1]");
  v = torchrun(1, 2);
  v["LOCAL_WORLD_SIZE"] = "1";
  expect_usage_error(v, "LOCAL_RANK: expected an integer below LOCAL_WORLD_SIZE");
  v = torchrun(0, 2);
  v.erase("MASTER_ADDR");
  expect_usage_error(v, "MASTER_ADDR: required");
  v = torchrun(0, 2);
  v["MASTER_PORT"] = "70000";
  expect_usage_error(v, "MASTER_PORT: expected an integer in [1, 65535], got '70000'");
}

TEST(DistEnvTest, OutputsAreNamedPerRank) {
  EXPECT_EQ(rank_output_path("run.json", 0), "run.rank0.json");
  EXPECT_EQ(rank_output_path("out/run.json", 3), "out/run.rank3.json");
  EXPECT_EQ(rank_output_path("out/report", 1), "out/report.rank1");
  EXPECT_EQ(rank_output_path("/a.b/run.v2.json", 1), "/a.b/run.v2.rank1.json");
}

TEST(DistEnvTest, BackendNamesAndAvailability) {
  EXPECT_STREQ(to_string(DistBackend::kNccl), "nccl");
  EXPECT_EQ(common::parse_enum<DistBackend>("gloo"), DistBackend::kGloo);
  // NCCL needs a CUDA LibTorch.
#if !defined(WORKLOAD_TORCH_CUDA)
  EXPECT_FALSE(built(Feature::kNccl));
#endif
}

}  // namespace
}  // namespace workload
