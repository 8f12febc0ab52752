// Tests for what train_resnet50 prints, as pure functions of the run's record: the lines before the
// run (its shape, the experiment settings, the rank, the notices), a step's line, and the summary
// with each way a run can be interrupted.
#include "lib/report/summary_text.h"

#include <gtest/gtest.h>

#include "lib/core/version.h"

namespace workload {
namespace {

RunFacts loader_run() {
  RunFacts f;
  f.config.data = "/data/food";
  f.config.loader.workers = 6;
  f.model = ModelFacts{101, 1, true, std::nullopt};
  f.loader = LoaderFacts{HostRingFacts{4, 1, true, 10, 0}, 100};
  return f;
}

TEST(SummaryTextTest, TheBannerSaysTheRunsShapeAndNothingElseForTheArticlesSettings) {
  EXPECT_EQ(format_banner(loader_run(), {}, ""),
            std::string("train_resnet50 ") + kWorkloadVersion +
                ": cuda, batch 128, 224 px, 3 warm-up + 8 captured steps, workers 6, prefetch 2, "
                "pinned yes, batch unit, iterator reused, decode cpu\n");
}

TEST(SummaryTextTest, TheBannerNamesExperimentsTheRankAndEachNotice) {
  RunFacts f = loader_run();
  f.config.synthetic = true;
  f.config.cuda_graph = true;
  f.config.precision = Precision::kBf16;
  f.model->on_cuda = false;
  f.dist = DistFacts{LaunchEnv{1, 2, 1, 2, "10.0.0.1", 29500, false, 0}, DistBackend::kNccl, ""};
  const std::string b = format_banner(f, {"first", "second"}, "[rank 1] ");
  EXPECT_NE(b.find("[rank 1] train_resnet50 "), std::string::npos) << b;
  EXPECT_NE(b.find(": cpu, batch 128"), std::string::npos) << b;
  EXPECT_NE(b.find("synthetic batches (no loader)\n"), std::string::npos) << b;
  EXPECT_NE(b.find("\nexperiment: precision bf16, host dtype float32, mode train, nvtx detail "
                   "steps, step replayed from a CUDA graph\n"),
            std::string::npos)
      << b;
  EXPECT_NE(b.find("[rank 1] distributed: rank 1 of 2, local rank 1, nccl, store 10.0.0.1:29500, "
                   "batch 128 per rank\n"),
            std::string::npos)
      << b;
  EXPECT_NE(b.find("[rank 1] note: first\n[rank 1] note: second\n"), std::string::npos) << b;
  // The weights' casts as the run resolved them.
  f.model->weight_cast = WeightCast::kPerLayer;
  EXPECT_NE(
      format_banner(f, {}, "").find("\nexperiment: precision bf16 (weights cast per-layer), "),
      std::string::npos);
  // --deterministic alone is an experiment line of its own.
  RunFacts d = loader_run();
  d.config.deterministic = true;
  EXPECT_NE(format_banner(d, {}, "").find("mode train, nvtx detail steps, deterministic (the same "
                                          "bits every run)\n"),
            std::string::npos)
      << format_banner(d, {}, "");
}

TEST(SummaryTextTest, TheBannerSaysTheLearningRateSchedule) {
  RunFacts f = loader_run();
  LrScheduleOptions o;
  o.peak_lr = 0.05;
  o.warmup_steps = 1;
  o.total_steps = 11;
  f.lr_schedule = LrPlan{o, true, 128};
  EXPECT_NE(format_banner(f, {}, "").find("\nsgd: lr cosine, peak 0.05 (scaled: 0.1 x global batch "
                                          "128 / 256), warm-up 1 of 11 steps\n"),
            std::string::npos)
      << format_banner(f, {}, "");
  o.kind = LrScheduleKind::kConstant;
  o.peak_lr = 0.1;
  o.warmup_steps = 0;
  f.lr_schedule = LrPlan{o, false, 128};
  f.config.label_smoothing = 0.1;
  EXPECT_NE(format_banner(f, {}, "[rank 0] ")
                .find("[rank 0] sgd: lr constant, peak 0.1, warm-up 0 of 11 steps, label "
                      "smoothing 0.1\n"),
            std::string::npos)
      << format_banner(f, {}, "[rank 0] ");
}

TEST(SummaryTextTest, AStepLineCountsItsKind) {
  StepRecord r;
  r.index = 2;
  r.batch_wait_ms = 1.5;
  r.h2d_submit_ms = 0.25;
  r.step_ms = 12;
  EXPECT_EQ(format_step("", r, 3, 8),
            "[step   3/8] batch_wait     1.50 ms | h2d_submit   0.25 ms | step    12.00 ms\n");
  r.warmup = true;
  EXPECT_EQ(format_step("[rank 0] ", r, 3, 8).rfind("[rank 0] [warmup 3/3]", 0), 0u);
}

TEST(SummaryTextTest, TheSummarySaysHowARunWasInterrupted) {
  RunFacts f = loader_run();
  f.result.steps.resize(2);
  f.result.images_per_s = 1234.5;
  EXPECT_NE(format_summary(f).find("throughput                   1234.5 images/s"),
            std::string::npos);
  EXPECT_NE(format_summary(f).find("loss after drain             n/a"), std::string::npos);
  EXPECT_EQ(format_summary(f).find("interrupted"), std::string::npos);
  f.result.interrupted = true;
  f.result.interrupt_signal = "SIGTERM";
  EXPECT_NE(format_summary(f).find("interrupted                  yes (SIGTERM)\n"),
            std::string::npos);
  f.result.stop_agreed_by = "rank 1: SIGTERM";
  EXPECT_NE(format_summary(f).find("yes (SIGTERM; the ranks stopped together for rank 1: SIGTERM)"),
            std::string::npos);
  f.result.aborted = "rank 1 missing";
  EXPECT_NE(format_summary(f).find("yes (SIGTERM; aborted: rank 1 missing)"), std::string::npos);
}

TEST(SummaryTextTest, AnFp16RunSaysItsLastScaleAndItsSkippedSteps) {
  RunFacts f = loader_run();
  f.result.steps.resize(2);
  EXPECT_EQ(format_summary(f).find("loss scale"), std::string::npos);
  f.loss_scaling = LossScalingFacts{LossScaler::Options{}, LossScaler::State{32768.0, 5, 2}};
  EXPECT_NE(format_summary(f).find("loss scale (fp16)            32768 at the end; 2 steps skipped "
                                   "(a gradient not finite)\n"),
            std::string::npos)
      << format_summary(f);
}

// With epochs, the steps they recorded as skipped are named, when they are all the skipped ones.
TEST(SummaryTextTest, AnFp16RunsEpochsNameTheSkippedSteps) {
  RunFacts f = loader_run();
  f.result.steps.resize(2);
  f.loss_scaling = LossScalingFacts{LossScaler::Options{}, LossScaler::State{8192.0, 936, 3}};
  EpochRecord e;
  e.loss_scale = 8192.0;
  e.skipped_steps = 3;
  e.skipped_at = {0, 1, 3};
  f.result.epochs = {e};
  EXPECT_NE(format_summary(f).find("3 steps skipped (a gradient not finite): steps 0, 1 and 3\n"),
            std::string::npos)
      << format_summary(f);
  // A list short of the count (epochs resumed from a checkpoint without it) names none.
  f.result.epochs[0].skipped_at = {0, 1};
  EXPECT_NE(format_summary(f).find("3 steps skipped (a gradient not finite)\n"), std::string::npos)
      << format_summary(f);
  f.loss_scaling->state.skipped_steps = 1;
  f.result.epochs[0].skipped_at = {7};
  EXPECT_NE(format_summary(f).find("1 steps skipped (a gradient not finite): step 7\n"),
            std::string::npos)
      << format_summary(f);
  f.loss_scaling->state.skipped_steps = 11;
  f.result.epochs[0].skipped_at = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_NE(format_summary(f).find(": steps 0, 1, 2, 3, 4, 5, 6, 7 and 3 more\n"),
            std::string::npos)
      << format_summary(f);
}

}  // namespace
}  // namespace workload
