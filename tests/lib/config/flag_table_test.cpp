// Tests for the flag-table visitors of lib/config/flag_table.h on a small table: declaration and
// help, reading only what was given, range and choice errors naming the flag, range checks of
// values set in code, optional flags, and the JSON form.
#include "lib/config/flag_table.h"

#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "data_pipeline/loader_options.h"

namespace workload {
namespace {

struct Settings {
  std::string path;
  int count = 3;
  std::uint64_t seed = 7;
  double rate = 0.1;
  bool on = true;
  data_pipeline::WorkUnit unit = data_pipeline::WorkUnit::kBatch;
  bool hidden = false;
};

template <typename S, typename V>
void visit_settings(S& s, V&& v) {
  v.text({"path", "G", "a path"}, s.path);
  v.integer({"count", "G", "how many"}, s.count, 1, 10);
  v.integer({"seed", "G", "a seed"}, s.seed, std::uint64_t{0},
            std::numeric_limits<std::uint64_t>::max());
  v.real({"rate", "G", "a rate"}, s.rate, 0.0, 1.0);
  v.boolean({"on", "G", "a switch"}, s.on);
  v.choice({"unit", "G", "what a worker claims"}, s.unit);
  v.boolean({"hidden", "G", "not in reports", /*reported=*/false}, s.hidden);
}

// Parses `args` against the table `visit` walks (visit(s, visitor) for an S s) and returns what it
// read: the help text and the flags given too when asked.
template <typename S, typename Visit>
S parse_table(Visit visit, std::vector<std::string> args, std::string* help,
              std::set<std::string>* given) {
  S s;
  cxxopts::Options options("prog");
  visit(s, DeclareFlags(options));
  args.insert(args.begin(), "prog");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  char** p = argv.data();
  const auto result = options.parse(argc, p);
  if (help) *help = options.help();
  ReadFlags reader(result);
  visit(s, reader);
  if (given) *given = reader.given();
  return s;
}

// Parses `args` against visit_settings' table.
Settings parse(std::vector<std::string> args, std::string* help = nullptr,
               std::set<std::string>* given = nullptr) {
  return parse_table<Settings>([](Settings& s, auto&& v) { visit_settings(s, v); }, std::move(args),
                               help, given);
}

void expect_usage_error(const std::vector<std::string>& args, const std::string& message) {
  try {
    parse(args);
    FAIL() << "expected a usage error for " << ::testing::PrintToString(args);
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(CliTest, UnsetFlagsKeepTheirValuesAndGivenOnesAreRead) {
  std::set<std::string> given;
  const Settings d = parse({}, nullptr, &given);
  EXPECT_TRUE(given.empty());
  EXPECT_EQ(d.count, 3);
  EXPECT_EQ(d.rate, 0.1);  // not round-tripped through text
  const Settings s = parse({"--path=/a b", "--count=10", "--seed=18446744073709551615",
                            "--rate=0.25", "--on=false", "--unit", "sample", "--hidden"},
                           nullptr, &given);
  EXPECT_EQ(s.path, "/a b");
  EXPECT_EQ(s.count, 10);
  EXPECT_EQ(s.seed, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(s.rate, 0.25);
  EXPECT_FALSE(s.on);
  EXPECT_EQ(s.unit, data_pipeline::WorkUnit::kSample);
  EXPECT_TRUE(s.hidden);
  EXPECT_EQ(given.size(), 7u);
}

TEST(CliTest, BadValuesNameTheirFlag) {
  expect_usage_error({"--count=0"}, "--count: expected an integer in [1, 10], got 0");
  expect_usage_error({"--count=x"}, "--count: expected an integer, got 'x'");
  expect_usage_error({"--seed=-1"}, "--seed: expected a non-negative integer, got '-1'");
  expect_usage_error({"--rate=2"}, "--rate: expected a number in [0, 1], got 2");
  expect_usage_error({"--rate=inf"}, "--rate: expected a number, got 'inf'");
  expect_usage_error({"--on=maybe"}, "--on: expected true or false, got 'maybe'");
  expect_usage_error({"--unit=pixel"}, "--unit: expected batch|sample, got 'pixel'");
  expect_usage_error({"--path="}, "--path: expected a value, got ''");
}

TEST(CliTest, HelpShowsChoicesAndDefaults) {
  std::string help;
  parse({}, &help);
  EXPECT_NE(help.find("batch|sample: what a worker claims"), std::string::npos) << help;
  EXPECT_NE(help.find("(default: 0.1)"), std::string::npos) << help;
  EXPECT_NE(help.find("(default: 3)"), std::string::npos) << help;
}

TEST(CliTest, RangeCheckOfValuesSetInCode) {
  Settings s;
  EXPECT_NO_THROW(visit_settings(s, CheckFlagRanges{}));
  s.count = 11;
  try {
    visit_settings(s, CheckFlagRanges{});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--count: expected an integer in [1, 10], got 11");
  }
  s.count = 1;
  s.rate = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(visit_settings(s, CheckFlagRanges{}), UsageError);
}

TEST(CliTest, JsonHoldsEveryReportedFlagUnderItsKey) {
  Settings s;
  s.unit = data_pipeline::WorkUnit::kSample;
  nlohmann::ordered_json j;
  visit_settings(s, FlagsToJson(j));
  EXPECT_EQ(j.dump(), R"({"path":"","count":3,"seed":7,"rate":0.1,"on":true,"unit":"sample"})");
  EXPECT_EQ(FlagsToJson::key("batch-size"), "batch_size");
}

// Flags whose absence means "a rule decides": nullopt until given, range-checked when set, null in
// the JSON, no default in the help.
struct Optionals {
  std::optional<double> peak;
  std::optional<int> ramp;
};

template <typename S, typename V>
void visit_optionals(S& s, V&& v) {
  v.real({"peak", "G", "a peak (default: a rule)"}, s.peak, 0.0, 1.0);
  v.integer({"ramp", "G", "a ramp (default: another rule)"}, s.ramp, 0, 10);
}

Optionals parse_optionals(std::vector<std::string> args, std::string* help = nullptr) {
  return parse_table<Optionals>([](Optionals& s, auto&& v) { visit_optionals(s, v); },
                                std::move(args), help, nullptr);
}

TEST(CliTest, OptionalFlagsStayUnsetUntilGiven) {
  std::string help;
  const Optionals unset = parse_optionals({}, &help);
  EXPECT_FALSE(unset.peak.has_value());
  EXPECT_FALSE(unset.ramp.has_value());
  EXPECT_NE(help.find("a peak (default: a rule)"), std::string::npos) << help;
  EXPECT_EQ(help.find("(default: )"), std::string::npos) << help;
  nlohmann::ordered_json j;
  visit_optionals(unset, FlagsToJson(j));
  EXPECT_EQ(j.dump(), R"({"peak":null,"ramp":null})");
  EXPECT_NO_THROW(visit_optionals(unset, CheckFlagRanges{}));

  const Optionals set = parse_optionals({"--peak=0.5", "--ramp=0"});
  EXPECT_EQ(set.peak, 0.5);
  EXPECT_EQ(set.ramp, 0);
  j = nlohmann::ordered_json();
  visit_optionals(set, FlagsToJson(j));
  EXPECT_EQ(j.dump(), R"({"peak":0.5,"ramp":0})");
  try {
    parse_optionals({"--ramp=11"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--ramp: expected an integer in [0, 10], got 11");
  }
  EXPECT_THROW(parse_optionals({"--peak=x"}), UsageError);
  Optionals bad;
  bad.peak = 2;
  try {
    visit_optionals(bad, CheckFlagRanges{});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--peak: expected a number in [0, 1], got 2");
  }
}

TEST(CliTest, ShortestTextReadsBack) {
  for (double v : {0.1, 0.9, 1e-4, 1e6, 3.0, 0.1 + 0.2, 1.0 / 3.0}) {
    EXPECT_EQ(std::strtod(shortest_text(v).c_str(), nullptr), v) << shortest_text(v);
  }
  EXPECT_EQ(shortest_text(0.0001), "0.0001");
  EXPECT_EQ(shortest_text(0.1), "0.1");
}

}  // namespace
}  // namespace workload
