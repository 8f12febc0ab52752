// Tests for the JSON report as a pure function of a run's record: the sections and their order,
// what a partial record (the watchdog's last resort) holds and leaves out, the ranks' section
// spelled once for both, and where the report is written.
#include "lib/report/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <vector>

#include "tests/support/test_util.h"

namespace workload {
namespace {

std::vector<std::string> keys(const nlohmann::ordered_json& j) {
  std::vector<std::string> out;
  for (const auto& item : j.items()) out.push_back(item.key());
  return out;
}

// A finished run of two captured steps on one rank of two, with its loader.
RunFacts finished_run() {
  RunFacts f;
  f.config.data = "/data/food";
  f.config.steps = 2;
  f.environment.libtorch = "9.9.9";
  f.environment.device.device_name = "cpu";
  f.environment.cuda_connections = {std::string("32"), "program"};
  f.environment.nccl_nvls_enable = "0";
  f.model = ModelFacts{101, 23715493, false, std::nullopt};
  f.loader = LoaderFacts{HostRingFacts{4, 1 << 20, false, 12, 0}, 3000};
  f.result.warmup_steps.resize(1);
  f.result.warmup_steps[0].warmup = true;
  f.result.steps.resize(2);
  f.result.steps[1].index = 1;
  f.result.steps[1].digest = 0xabc;
  f.result.steps[1].loss = 4.5f;
  f.result.steps[1].phase_ms = {{"data_load", 2.0}, {"batch_wait", 1.5}, {"forward", 7.0}};
  f.result.loss_after_drain = 4.25;
  f.result.parameter_digest = 0x1234;
  f.dist = DistFacts{LaunchEnv{1, 2, 1, 2, "127.0.0.1", 29500, false, 0}, DistBackend::kGloo, ""};
  return f;
}

TEST(ReportTest, AFinishedRunHasEverySectionInOrder) {
  const nlohmann::ordered_json j = report_json(finished_run());
  EXPECT_EQ(keys(j),
            (std::vector<std::string>{"program", "version", "config", "environment", "model",
                                      "loader", "capture", "steps", "warmup", "summary",
                                      "skipped_images", "loss_after_drain", "nonfinite_loss",
                                      "nonfinite_stopped", "interrupted", "dist"}));
  EXPECT_TRUE(j["nonfinite_loss"].is_null()) << "every loss finite";
  EXPECT_EQ(j["nonfinite_stopped"], false);
  EXPECT_EQ(j["config"]["data"], "/data/food");
  EXPECT_EQ(j["environment"]["libtorch"], "9.9.9");
  EXPECT_EQ(j["environment"]["cuda_device_max_connections"], "32");
  EXPECT_EQ(j["environment"]["cuda_device_max_connections_from"], "program");
  EXPECT_EQ(j["model"]["num_classes"], 101);
  EXPECT_TRUE(j["model"]["weight_cast"].is_null());  // fp32
  EXPECT_EQ(j["loader"]["dataset_images"], 3000);
  EXPECT_EQ(j["capture"]["steps"], 2);
  EXPECT_EQ(j["steps"][1]["digest"], "0x0000000000000abc");
  EXPECT_DOUBLE_EQ(j["steps"][1]["loss"].get<double>(), 4.5);
  EXPECT_FALSE(j["steps"][0].contains("loss"));
  EXPECT_EQ(j["steps"][1]["phase_ms"],
            nlohmann::ordered_json({{"data_load", 2.0}, {"batch_wait", 1.5}, {"forward", 7.0}}));
  EXPECT_TRUE(j["steps"][0]["phase_ms"].is_object());
  EXPECT_EQ(j["summary"]["phase_ms_p50"]["forward"], 7.0);
  EXPECT_DOUBLE_EQ(j["loss_after_drain"].get<double>(), 4.25);
  EXPECT_EQ(j["dist"]["rank"], 1);
  EXPECT_EQ(j["dist"]["backend"], "gloo");
  EXPECT_EQ(j["dist"]["nccl_nvls_enable"], "0");
  EXPECT_EQ(j["dist"]["parameter_digest"], "0x0000000000001234");
  EXPECT_TRUE(j["dist"]["lost_rank"].is_null());
}

TEST(ReportTest, AnUnsetVariableAndNoLossAreNull) {
  RunFacts f = finished_run();
  f.environment.cuda_connections = {};
  f.environment.nccl_nvls_enable.reset();
  f.result.loss_after_drain.reset();
  const nlohmann::ordered_json j = report_json(f);
  EXPECT_TRUE(j["environment"]["cuda_device_max_connections"].is_null());
  EXPECT_TRUE(j["environment"]["cuda_device_max_connections_from"].is_null());
  EXPECT_TRUE(j["dist"]["nccl_nvls_enable"].is_null());
  EXPECT_TRUE(j["loss_after_drain"].is_null());
}

// The schedule the optimizer followed, where its peak came from, and each step's LR.
TEST(ReportTest, TheLearningRateScheduleSectionSaysWhatRan) {
  RunFacts f = finished_run();
  EXPECT_FALSE(report_json(f).contains("lr_schedule"));  // --mode forward: no optimizer
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kStep;
  o.peak_lr = 0.05;
  o.warmup_steps = 1;
  o.total_steps = 3;
  o.milestones = {2};
  f.lr_schedule = LrPlan{o, true, 128, true};
  f.result.steps[1].lr = 0.005;
  const nlohmann::ordered_json j = report_json(f);
  EXPECT_EQ(keys(j),
            (std::vector<std::string>{
                "program", "version", "config", "environment", "model", "loader", "lr_schedule",
                "capture", "steps", "warmup", "summary", "skipped_images", "loss_after_drain",
                "nonfinite_loss", "nonfinite_stopped", "interrupted", "dist"}));
  EXPECT_EQ(j["lr_schedule"],
            nlohmann::ordered_json::parse(
                R"({"kind": "step", "lr": 0.05, "scaled": true, "global_batch": 128,
                    "reference_lr": 0.1, "reference_batch": 256, "warmup_steps": 1,
                    "total_steps": 3, "milestones": [2], "decay_factor": 0.1,
                    "lr_on_device": true})"));
  EXPECT_EQ(j["steps"][1]["lr"], 0.005);
  EXPECT_FALSE(j["steps"][0].contains("lr"));
  o.kind = LrScheduleKind::kConstant;
  o.warmup_steps = 0;
  f.lr_schedule = LrPlan{o, false, 128};
  const nlohmann::ordered_json constant = report_json(f)["lr_schedule"];
  EXPECT_EQ(constant["lr_on_device"], false);
  EXPECT_FALSE(constant.contains("milestones"));
  EXPECT_FALSE(constant.contains("final_lr"));
}

// fp16: GradScaler's options, the scale the run ended on and the steps it skipped, after the
// schedule; no section in a run without loss scaling.
TEST(ReportTest, TheLossScalingSectionSaysWhereTheScaleEnded) {
  RunFacts f = finished_run();
  EXPECT_FALSE(report_json(f).contains("loss_scaling"));
  f.loss_scaling = LossScalingFacts{LossScaler::Options{}, LossScaler::State{8192.0, 150, 4}};
  const nlohmann::ordered_json j = report_json(f);
  EXPECT_EQ(keys(j)[6], "loss_scaling");
  EXPECT_EQ(j["loss_scaling"],
            nlohmann::ordered_json::parse(
                R"({"init_scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                    "growth_interval": 2000, "final_scale": 8192.0, "growth_tracker": 150,
                    "skipped_steps": 4})"));
}

// The watchdog's last resort: the same writer, without what only the trainer's thread knows.
TEST(ReportTest, APartialRecordSaysSoAndSpellsTheSameRankSection) {
  RunFacts f = finished_run();
  const nlohmann::ordered_json full = report_json(f);
  f.model.reset();
  f.loader.reset();
  f.result = RunResult{};
  f.result.interrupted = true;
  f.result.interrupt_signal = "none";
  f.result.aborted = "rank 0 missing: no heartbeat for 5.0 s";
  f.result.lost_rank = 0;
  f.partial = PartialFacts{"written by the distributed watchdog", 7};
  const nlohmann::ordered_json j = report_json(f);
  EXPECT_EQ(keys(j), (std::vector<std::string>{"program", "version", "config", "environment",
                                               "partial", "steps_completed", "interrupted",
                                               "interrupt_signal", "dist"}));
  EXPECT_EQ(j["partial"], "written by the distributed watchdog");
  EXPECT_EQ(j["steps_completed"], 7);
  EXPECT_EQ(j["config"], full["config"]);
  EXPECT_EQ(j["environment"], full["environment"]);
  EXPECT_EQ(keys(j["dist"]), keys(full["dist"]));
  EXPECT_EQ(j["dist"]["aborted"], "rank 0 missing: no heartbeat for 5.0 s");
  EXPECT_EQ(j["dist"]["lost_rank"], 0);
  EXPECT_EQ(j["dist"]["parameter_digest"], "");
}

// JSON has no NaN or infinity: the record of an epoch whose losses were not finite (a run with
// --allow-nonfinite-loss) is written with nulls there, and a checkpoint's copy of it must read back
// as not finite, not fail the resume.
TEST(ReportTest, AnEpochsNonFiniteLossesReadBackAsNotFinite) {
  EpochRecord e;
  e.epoch = 3;
  e.train_loss = std::numeric_limits<double>::infinity();
  e.lr = 0.05;
  e.eval = EvalRecord{};
  e.eval->loss = std::numeric_limits<double>::quiet_NaN();
  e.eval->top1 = 0.25;
  const nlohmann::ordered_json written = nlohmann::ordered_json::parse(epoch_json(e).dump());
  EXPECT_TRUE(written["train_loss"].is_null());
  EXPECT_TRUE(written["eval"]["loss"].is_null());
  const EpochRecord back = epoch_from_json(written);
  EXPECT_EQ(back.epoch, 3);
  EXPECT_FALSE(std::isfinite(back.train_loss));
  ASSERT_TRUE(back.eval.has_value());
  EXPECT_FALSE(std::isfinite(back.eval->loss));
  EXPECT_EQ(back.eval->top1, 0.25);
  EXPECT_EQ(back.lr, 0.05);
  // A missing number is still 0, and a number of the wrong type still an error.
  EXPECT_EQ(epoch_from_json({{"epoch", 1}}).train_loss, 0.0);
  EXPECT_THROW(epoch_from_json({{"train_loss", "low"}}), nlohmann::json::exception);
}

// An fp16 epoch's loss scaling (its scale, the run's skipped steps and which they were) is written
// and read back, so a resumed run lists the earlier epochs' skips too; other epochs have none.
TEST(ReportTest, AnFp16EpochsLossScalingReadsBack) {
  EpochRecord e;
  e.epoch = 2;
  EXPECT_FALSE(epoch_json(e).contains("loss_scale"));
  EXPECT_FALSE(epoch_json(e).contains("skipped_at"));
  e.loss_scale = 16384.0;
  e.skipped_steps = 2;
  e.skipped_at = {0, 2};
  const nlohmann::ordered_json written = nlohmann::ordered_json::parse(epoch_json(e).dump());
  EXPECT_EQ(written["loss_scale"], 16384.0);
  EXPECT_EQ(written["skipped_steps"], 2);
  EXPECT_EQ(written["skipped_at"], nlohmann::ordered_json::parse("[0, 2]"));
  const EpochRecord back = epoch_from_json(written);
  ASSERT_TRUE(back.loss_scale.has_value());
  EXPECT_EQ(*back.loss_scale, 16384.0);
  EXPECT_EQ(back.skipped_steps, 2);
  EXPECT_EQ(back.skipped_at, (std::vector<std::int64_t>{0, 2}));
  // A checkpoint written before the list: the scale and count without it.
  const EpochRecord older = epoch_from_json({{"epoch", 1}, {"loss_scale", 8.0}});
  EXPECT_EQ(older.loss_scale, 8.0);
  EXPECT_TRUE(older.skipped_at.empty());
  EXPECT_FALSE(epoch_from_json({{"epoch", 1}}).loss_scale.has_value());
}

TEST(ReportTest, Hex64IsFixedWidth) {
  EXPECT_EQ(hex64(0), "0x0000000000000000");
  EXPECT_EQ(hex64(0xDEADBEEFULL), "0x00000000deadbeef");
}

TEST(ReportTest, WriteReportReplacesTheFileAndNamesBadPaths) {
  test_util::TempDir tmp;
  const std::string path = (tmp / "r.json").string();
  write_report(path, {{"a", 1}});
  write_report(path, {{"a", 2}});
  std::ifstream in(path);
  EXPECT_EQ(nlohmann::json::parse(in)["a"], 2);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(tmp.path()), {}), 1)
      << "no staging file left beside it";
  try {
    write_report((tmp / "missing_dir" / "r.json").string(), {{"a", 1}});
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("--report"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("missing_dir"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace workload
