// Tests for the named enums: every table names each value once, and names round-trip.
#include "common/named_enum.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "data_pipeline/food101_index.h"
#include "data_pipeline/loader_options.h"
#include "lib/config/train_config.h"

namespace data_pipeline {
namespace {

using common::to_string;

// Each table: distinct values, distinct non-empty names, every name parses back to its value, and
// enum_choices lists them in order.
template <typename E>
void expect_consistent_table(std::size_t expected_size) {
  const auto& table = enum_names(E{});
  std::set<std::string> names;
  std::set<int> values;
  std::string choices;
  for (const auto& entry : table) {
    ASSERT_NE(entry.name, nullptr);
    EXPECT_FALSE(std::string(entry.name).empty());
    names.insert(entry.name);
    values.insert(static_cast<int>(entry.value));
    EXPECT_STREQ(to_string(entry.value), entry.name);
    ASSERT_TRUE(common::parse_enum<E>(entry.name).has_value()) << entry.name;
    EXPECT_EQ(*common::parse_enum<E>(entry.name), entry.value);
    choices += (choices.empty() ? "" : "|") + std::string(entry.name);
  }
  EXPECT_EQ(std::size(table), expected_size);
  EXPECT_EQ(names.size(), expected_size);
  EXPECT_EQ(values.size(), expected_size);
  EXPECT_EQ(common::enum_choices<E>(), choices);
  EXPECT_FALSE(common::parse_enum<E>("").has_value());
  EXPECT_FALSE(common::parse_enum<E>("no-such-name").has_value());
}

TEST(NamedEnumTest, EveryTableIsConsistent) {
  expect_consistent_table<Split>(2);
  expect_consistent_table<HostDType>(2);
  expect_consistent_table<WorkUnit>(2);
  expect_consistent_table<BadImagePolicy>(2);
  expect_consistent_table<workload::Device>(2);
  expect_consistent_table<workload::Precision>(3);
  expect_consistent_table<workload::WeightCast>(3);
  expect_consistent_table<workload::RunMode>(2);
  expect_consistent_table<workload::NvtxDetail>(2);
  expect_consistent_table<workload::ForwardBn>(2);
}

TEST(NamedEnumTest, NamesAreTheFlagAndReportSpellings) {
  EXPECT_STREQ(to_string(WorkUnit::kSample), "sample");
  EXPECT_STREQ(to_string(HostDType::kUInt8), "uint8");
  EXPECT_STREQ(to_string(BadImagePolicy::kSkip), "skip");
  EXPECT_STREQ(to_string(workload::Precision::kBf16), "bf16");
  EXPECT_STREQ(to_string(workload::WeightCast::kPerLayer), "per-layer");
  EXPECT_EQ(common::enum_choices<workload::Device>(", "), "cuda, cpu");
  EXPECT_FALSE(common::parse_enum<WorkUnit>("Batch").has_value());  // case matters
}

}  // namespace
}  // namespace data_pipeline
