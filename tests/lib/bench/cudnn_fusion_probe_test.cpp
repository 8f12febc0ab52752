// Tests for the cuDNN fusion probe (lib/bench/cudnn_fusion_probe.h): its shapes and patterns as a
// user gives them, its table and JSON, and, on a GPU, the plain convolutions of a small shape
// against LibTorch's FP32 reference and a row for every fused graph, taken or refused.
#include "lib/bench/cudnn_fusion_probe.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cmath>
#include <map>
#include <string>

#include "lib/core/usage_error.h"

namespace workload::bench {
namespace {

TEST(CudnnFusionProbeTest, ParsesAShapeAndSaysWhatIsWrongWithOne) {
  const ConvShape s = parse_conv_shape("56x56x128-128r3s2", "--shapes");
  EXPECT_EQ(s.h, 56);
  EXPECT_EQ(s.w, 56);
  EXPECT_EQ(s.c, 128);
  EXPECT_EQ(s.k, 128);
  EXPECT_EQ(s.r, 3);
  EXPECT_EQ(s.stride, 2);
  EXPECT_EQ(s.pad(), 1);
  EXPECT_EQ(s.out_h(), 28);
  EXPECT_EQ(s.name(), "56x56x128-128r3s2");
  EXPECT_EQ(parse_conv_shape("14x14x1024-256r1s1", "--shapes").out_w(), 14);
  for (const char* bad : {"56x56x64", "56x56x64-64r2s1", "0x56x64-64r3s1", "56x56x64-64r3s0",
                          "56x56x64-64r3s1,", "a56x56x64-64r3s1"}) {
    try {
      parse_conv_shape(bad, "--shapes");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--shapes"), std::string::npos) << e.what();
    }
  }
}

TEST(CudnnFusionProbeTest, TheDefaultShapesAreTheBottlenecksTheIssueNames) {
  std::vector<std::string> names;
  for (const auto& s : default_conv_shapes()) names.push_back(s.name());
  EXPECT_EQ(names, (std::vector<std::string>{"56x56x64-64r3s1", "56x56x64-256r1s1",
                                             "14x14x1024-256r1s1", "56x56x128-128r3s2"}));
}

TEST(CudnnFusionProbeTest, AnUnknownPatternOrDtypeIsRefusedBeforeAnyDeviceWork) {
  FusionProbeOptions o;
  o.patterns = {"conv", "conv_bn_relu"};
  EXPECT_THROW(run_fusion_probe(o), UsageError);
  o.patterns = {"conv"};
  o.dtypes = {"fp16", "fp8"};
  EXPECT_THROW(run_fusion_probe(o), UsageError);
}

TEST(CudnnFusionProbeTest, TheTableAndTheJsonHoldEveryRow) {
  ProbeRow ok{"56x56x64-64r3s1", "fp16", "conv_genstats", "ok", {}, 153.0, 2, 134.0, 2.5, {}};
  ok.engines = {{2, false, true, "A", true, "", 12.5, 153.0},
                {3, true, false, "A", false, "not supported", 0, 0}};
  ok.errors = {{"y", 4.2e-4}, {"sum", 1.1e-5}};
  ProbeRow refused{
      "56x56x64-64r3s1", "bf16", "sbr_wgrad", "no engine ran this graph", {}, 0, -1, 0, 0.5, {}};
  const std::string table = probe_rows_to_table({ok, refused});
  EXPECT_NE(
      table.find("| 56x56x64-64r3s1 | fp16 | conv_genstats | 2 nd, 3 rtc (not built) | 153.0 [2] "
                 "| 1.14x | 12.5 | y 4.2e-04, sum 1.1e-05 |"),
      std::string::npos)
      << table;
  EXPECT_NE(table.find("| bf16 | sbr_wgrad | none | no engine ran this graph |"), std::string::npos)
      << table;
  const auto j = probe_rows_to_json({ok, refused});
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["engines"][1]["runtime_compiled"], true);
  EXPECT_EQ(j[0]["engines"][0]["nondeterministic"], true);
  EXPECT_EQ(j[0]["engines"][1]["nondeterministic"], false);
  EXPECT_EQ(j[0]["errors"]["sum"], 1.1e-5);
  EXPECT_EQ(j[0]["seconds"], 2.5);
  EXPECT_EQ(j[1]["status"], "no engine ran this graph");
}

TEST(CudnnFusionProbeTest, OnAGpuThePlainConvolutionsMatchTheReferenceAndEveryGraphHasARow) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  FusionProbeOptions o;
  o.batch = 4;
  o.shapes = {parse_conv_shape("8x8x32-32r3s1", "--shapes")};
  o.dtypes = {"fp16"};
  o.repeats = 2;
  o.max_plans = 2;
  const auto rows = run_fusion_probe(o);
  ASSERT_EQ(rows.size(), probe_patterns().size());
  std::map<std::string, const ProbeRow*> by;
  for (const auto& r : rows) {
    EXPECT_FALSE(r.status.empty()) << r.pattern;
    by[r.pattern] = &r;
    for (const auto& [name, err] : r.errors) EXPECT_TRUE(std::isfinite(err)) << r.pattern << name;
  }
  // Every cuDNN 9 runs the plain convolutions; fp16 against the FP32 reference of the same rounded
  // inputs is off by its own rounding (about 5e-4).
  for (const char* plain : {"conv", "wgrad", "dgrad"}) {
    const ProbeRow& r = *by.at(plain);
    ASSERT_EQ(r.status, "ok") << plain;
    EXPECT_GT(r.best_us, 0) << plain;
    ASSERT_FALSE(r.errors.empty()) << plain;
    EXPECT_LT(r.errors.front().second, 5e-3) << plain << " " << r.errors.front().first;
  }
  EXPECT_GT(by.at("conv_genstats")->plain_us, 0);
}

// A budget already spent: every row is listed, none is run.
TEST(CudnnFusionProbeTest, OnAGpuRowsPastTheBudgetAreListedAsSkipped) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  FusionProbeOptions o;
  o.batch = 4;
  o.shapes = {parse_conv_shape("8x8x32-32r3s1", "--shapes"),
              parse_conv_shape("8x8x32-64r1s1", "--shapes")};
  o.dtypes = {"fp16"};
  o.budget_s = 1e-9;
  const auto rows = run_fusion_probe(o);
  ASSERT_EQ(rows.size(), 2 * probe_patterns().size());
  for (const auto& r : rows) {
    EXPECT_EQ(r.status, "skipped: --budget-s reached") << r.shape << " " << r.pattern;
    EXPECT_TRUE(r.engines.empty()) << r.pattern;
  }
}

}  // namespace
}  // namespace workload::bench
