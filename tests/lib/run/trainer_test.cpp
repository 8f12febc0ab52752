// Tests for Trainer on the CPU: digests independent of loader settings, iterator reset vs reuse,
// synthetic mode, the report's schema, and early stop.
#include "lib/run/trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include "data_pipeline/data_error.h"
#include "lib/core/build_features.h"
#include "lib/distributed/data_parallel.h"
#include "lib/distributed/distributed.h"
#include "lib/input/synthetic_input.h"
#include "lib/report/report.h"
#include "tests/support/test_util.h"

namespace workload {
namespace {

class TrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new test_util::TempDir();
    test_util::make_dataset(tmp_->path(), 3, 8, 3, 0.0);  // 24 training images, 3 classes
  }
  static void TearDownTestSuite() { delete tmp_; }
  static TrainConfig config() {
    TrainConfig c;
    c.data = tmp_->path().string();
    c.device = Device::kCpu;
    c.loader.batch_size = 4;
    c.loader.transform.image_size = 32;
    c.warmup = 2;
    c.steps = 3;
    c.loader.workers = 2;
    c.lr = 0.01;
    c.quiet = true;
    return c;
  }
  static std::vector<std::uint64_t> digests(const RunResult& r) {
    std::vector<std::uint64_t> d;
    for (const auto& s : r.warmup_steps) d.push_back(s.digest);
    for (const auto& s : r.steps) d.push_back(s.digest);
    return d;
  }
  // Expects `graph`'s per-step losses within `tolerance` (relative, at least 1 absolute) of
  // `eager`'s, which it must have as many of; returns the worst relative difference.
  static double worst_loss_difference(const RunResult& eager, const RunResult& graph,
                                      double tolerance, const std::string& what) {
    EXPECT_EQ(graph.steps.size(), eager.steps.size()) << what;
    double worst = 0;
    for (std::size_t i = 0; i < std::min(eager.steps.size(), graph.steps.size()); ++i) {
      EXPECT_TRUE(eager.steps[i].loss && graph.steps[i].loss) << what << ", step " << i;
      if (!eager.steps[i].loss || !graph.steps[i].loss) continue;
      const double e = *eager.steps[i].loss, g = *graph.steps[i].loss;
      EXPECT_NEAR(g, e, tolerance * std::max(1.0, std::abs(e))) << what << ", step " << i;
      worst = std::max(worst, std::abs(g - e) / std::max(1.0, std::abs(e)));
    }
    return worst;
  }
  static test_util::TempDir* tmp_;
};
test_util::TempDir* TrainerTest::tmp_ = nullptr;

TEST_F(TrainerTest, DigestsDoNotDependOnLoaderSettings) {
  const auto reference = digests(Trainer(config()).run());
  ASSERT_EQ(reference.size(), 5u);
  EXPECT_NE(reference[0], reference[1]);
  struct Variant {
    const char* name;
    void (*apply)(TrainConfig&);
  };
  const Variant variants[] = {
      {"workers=0", [](TrainConfig& c) { c.loader.workers = 0; }},
      {"workers=3,sample",
       [](TrainConfig& c) {
         c.loader.workers = 3;
         c.loader.work_unit = data_pipeline::WorkUnit::kSample;
       }},
      {"prefetch=1", [](TrainConfig& c) { c.loader.prefetch_factor = 1; }},
      {"prefetch=4,no pin",
       [](TrainConfig& c) {
         c.loader.prefetch_factor = 4;
         c.loader.pin_memory = false;
       }},
  };
  for (const auto& v : variants) {
    TrainConfig c = config();
    v.apply(c);
    EXPECT_EQ(digests(Trainer(c).run()), reference) << v.name;
  }
}

TEST_F(TrainerTest, Uint8HostBatchesHaveTheirOwnStableDigests) {
  TrainConfig c = config();
  c.loader.transform.dtype = data_pipeline::HostDType::kUInt8;
  const auto u8 = digests(Trainer(c).run());
  c.loader.workers = 0;
  c.loader.work_unit = data_pipeline::WorkUnit::kSample;
  EXPECT_EQ(digests(Trainer(c).run()), u8);  // invariant across loader settings
  c.loader.workers = 3;
  c.loader.prefetch_factor = 1;
  EXPECT_EQ(digests(Trainer(c).run()), u8);
  const auto f32 = digests(Trainer(config()).run());
  for (size_t i = 0; i < u8.size(); ++i) EXPECT_NE(u8[i], f32[i]);  // a different byte layout
}

TEST_F(TrainerTest, Uint8NormalisedOnTheDeviceTrainsLikeFloat32) {
  // The same batches and initial weights: the first forward's loss agrees to float rounding.
  TrainConfig c = config();
  c.warmup = 0;
  c.steps = 1;
  c.mode = RunMode::kForward;
  const RunResult f32 = Trainer(c).run();
  c.loader.transform.dtype = data_pipeline::HostDType::kUInt8;
  const RunResult u8 = Trainer(c).run();
  ASSERT_TRUE(f32.loss_after_drain && u8.loss_after_drain);
  EXPECT_NEAR(*u8.loss_after_drain, *f32.loss_after_drain, 1e-3);
}

// --fuse-conv-bn on the CPU: the fused blocks on LibTorch's kernels see the same batches and give
// the first step's loss to float rounding (the steps after it part with the rounding: this tiny
// run's losses move by whole units a step), and the run says which pieces ran.
TEST_F(TrainerTest, FusedBottlenecksTrainOnTheSameBatchesFromTheSameLoss) {
  TrainConfig c = config();
  c.warmup = 0;
  c.sync_every_step = true;  // every step's loss
  const RunResult modules = Trainer(c).run();
  c.fuse_conv_bn = true;
  Trainer t(c);
  const RunResult fused = t.run();
  ASSERT_EQ(fused.steps.size(), modules.steps.size());
  EXPECT_EQ(digests(fused), digests(modules));
  // The bar: the modules against themselves in NCHW (other kernels, other rounding), three times,
  // plus 0.2% of the loss for a path where the two layouts happen to round alike. At 32 px the last
  // stage normalises 4 values a channel, so one step's loss moves in its fourth digit: measured
  // 2.7e-4 and 5.4e-4 against the layouts' 2.4e-4 and 3.9e-4 (ATen default and avx2).
  c.fuse_conv_bn = false;
  c.loader.transform.layout = data_pipeline::ImageLayout::kNchw;
  const RunResult nchw = Trainer(c).run();
  ASSERT_TRUE(fused.steps[0].loss && modules.steps[0].loss && nchw.steps[0].loss);
  const double floor = std::abs(*nchw.steps[0].loss - *modules.steps[0].loss);
  EXPECT_LE(std::abs(*fused.steps[0].loss - *modules.steps[0].loss),
            3 * floor + 2e-3 * std::abs(*modules.steps[0].loss))
      << "the layouts differ by " << floor;
  for (const auto& s : fused.steps) EXPECT_TRUE(s.loss && std::isfinite(*s.loss));
  bool said = false;
  for (const auto& n : t.notices()) said = said || n.find("--fuse-conv-bn") != std::string::npos;
  EXPECT_TRUE(said) << "the run says its fused blocks ran on LibTorch's kernels";
}

TEST_F(TrainerTest, ForwardModeLeavesTheWeightsAlone) {
  for (const ForwardBn bn : {ForwardBn::kEval, ForwardBn::kTrain}) {
    TrainConfig c = config();
    c.mode = RunMode::kForward;
    c.forward_bn = bn;
    Trainer t(c);
    std::vector<torch::Tensor> before;
    for (const auto& p : t.model()->parameters()) before.push_back(p.clone());
    const auto running_before = t.model()->named_buffers()["bn1.running_mean"].clone();
    const RunResult r = t.run();
    EXPECT_EQ(r.steps.size(), 3u);
    const auto params = t.model()->parameters();
    for (size_t i = 0; i < params.size(); ++i) ASSERT_TRUE(torch::equal(params[i], before[i]));
    for (const auto& p : params) EXPECT_FALSE(p.grad().defined());
    EXPECT_FALSE(r.steps[0].lr.has_value());  // no optimizer step, no learning rate
    EXPECT_FALSE(t.facts(r).lr_schedule.has_value());
    const bool stats_moved =
        !torch::equal(t.model()->named_buffers()["bn1.running_mean"], running_before);
    EXPECT_EQ(stats_moved, bn == ForwardBn::kTrain) << to_string(bn);
  }
}

TEST_F(TrainerTest, Bf16OnTheCpuIsRejected) {
  TrainConfig c = config();
  c.precision = Precision::kBf16;
  EXPECT_THROW(Trainer{c}, UsageError);
}

TEST_F(TrainerTest, ResetStartsANewTraversalReuseContinues) {
  const RunResult reuse = Trainer(config()).run();
  TrainConfig c = config();
  c.reuse_iterator = false;
  const RunResult reset = Trainer(c).run();
  // Reused: capture continues the warm-up's epoch at batch 2; reset: epoch 1 from batch 0.
  EXPECT_EQ(reuse.steps[0].epoch, 0);
  EXPECT_EQ(reuse.steps[0].batch_in_epoch, 2);
  EXPECT_EQ(reset.steps[0].epoch, 1);
  EXPECT_EQ(reset.steps[0].batch_in_epoch, 0);
  EXPECT_EQ(digests(reuse)[0], digests(reset)[0]);  // same warm-up
  EXPECT_NE(reuse.steps[0].digest, reset.steps[0].digest);
  EXPECT_GE(reset.iterator_reset_ms, 0.0);
}

TEST_F(TrainerTest, RunProducesTimingsThroughputAndLoss) {
  Trainer t(config());
  int calls = 0;
  const RunResult r = t.run([&](const StepRecord&) { ++calls; });
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(r.warmup_steps.size(), 2u);
  EXPECT_EQ(r.steps.size(), 3u);
  EXPECT_FALSE(r.capture_started);  // CPU: the profiler API is skipped
  EXPECT_GT(r.elapsed_s, 0.0);
  EXPECT_NEAR(r.images_per_s, 3 * 4 / r.elapsed_s, 1e-9);
  ASSERT_TRUE(r.loss_after_drain.has_value());
  EXPECT_TRUE(std::isfinite(*r.loss_after_drain));
  for (const auto& s : r.steps) {
    EXPECT_GE(s.step_ms, s.batch_wait_ms + s.h2d_submit_ms);
    EXPECT_EQ(s.warmup, false);
    // Every range inside torch_step, in the order the step opened them, each within the step.
    std::vector<std::string> names;
    double device_phases = 0;
    for (const auto& [name, ms] : s.phase_ms) {
      names.push_back(name);
      EXPECT_GE(ms, 0.0) << name;
      if (name != "data_load" && name != "batch_wait" && name != "h2d_submit") device_phases += ms;
    }
    EXPECT_EQ(names, (std::vector<std::string>{"data_load", "batch_wait", "h2d_submit", "forward",
                                               "zero_grad", "backward", "optimizer_step"}));
    EXPECT_LE(s.phase_ms[0].second + device_phases, s.step_ms + 1e-6);
    EXPECT_GE(s.phase_ms[0].second, s.phase_ms[1].second);  // data_load holds batch_wait
  }
  EXPECT_FALSE(r.warmup_steps[0].phase_ms.empty());
  EXPECT_EQ(t.num_classes(), 3);
  EXPECT_FALSE(t.notices().empty());
}

TEST_F(TrainerTest, InjectedStallsSleepInTheirPhaseAtTheirCapturedStepOnly) {
  TrainConfig c = config();
  c.inject_stall = {{"forward", 1, 250.0}, {"batch_wait", 2, 120.0}, {"backward", 2, 80.0}};
  Trainer t(c);
  const RunResult r = t.run();
  for (const auto& s : r.warmup_steps) EXPECT_TRUE(s.injected_stalls.empty());
  ASSERT_EQ(r.steps.size(), 3u);
  EXPECT_TRUE(r.steps[0].injected_stalls.empty());
  ASSERT_EQ(r.steps[1].injected_stalls.size(), 1u);
  EXPECT_EQ(r.steps[1].injected_stalls[0].phase, "forward");
  EXPECT_GE(r.steps[1].step_ms, 250.0);
  ASSERT_EQ(r.steps[2].injected_stalls.size(), 2u);
  EXPECT_EQ(r.steps[2].injected_stalls[0].phase, "batch_wait");  // in the order the step runs
  EXPECT_EQ(r.steps[2].injected_stalls[1].phase, "backward");
  EXPECT_GE(r.steps[2].batch_wait_ms, 120.0);  // the host-timed range holds the sleep
  EXPECT_GE(r.steps[2].step_ms, 200.0);
  // The report lists them in the config and per step.
  const auto j = report_json(t.facts(r));
  EXPECT_EQ(j["config"]["inject_stall"],
            nlohmann::ordered_json({"forward@1:250", "batch_wait@2:120", "backward@2:80"}));
  EXPECT_EQ(j["steps"][1]["injected_stalls"][0]["phase"], "forward");
  EXPECT_EQ(j["steps"][1]["injected_stalls"][0]["ms"], 250.0);
  EXPECT_FALSE(j["steps"][0].contains("injected_stalls"));
}

TEST_F(TrainerTest, NchwKeepsTheModelAndBatchesContiguous) {
  TrainConfig c = config();
  c.warmup = 0;
  c.steps = 1;  // the first step's loss: same weights, same images (training then amplifies
                // rounding differences between the layouts' kernels)
  TrainConfig channels_last = c;
  c.loader.transform.layout = data_pipeline::ImageLayout::kNchw;
  Trainer t(c);
  for (const auto& p : t.model()->parameters()) {
    if (p.dim() == 4 && p.size(2) > 1) {
      EXPECT_TRUE(p.is_contiguous());
      EXPECT_FALSE(p.is_contiguous(torch::MemoryFormat::ChannelsLast));
    }
  }
  const RunResult r = t.run();
  ASSERT_TRUE(r.loss_after_drain.has_value());
  EXPECT_TRUE(std::isfinite(*r.loss_after_drain));
  EXPECT_EQ(report_json(t.facts(r))["model"]["memory_format"], "nchw");
  EXPECT_TRUE(report_json(t.facts(r))["model"]["weight_cast"].is_null());  // fp32: nothing cast
  // The same images and labels, in another layout: the channels_last run's loss, to rounding.
  const RunResult cl = Trainer(channels_last).run();
  // (oneDNN picks other convolution algorithms per layout: 4e-4 relative was measured.)
  EXPECT_NEAR(*r.loss_after_drain, *cl.loss_after_drain, 2e-3 * std::abs(*cl.loss_after_drain));
}

TEST_F(TrainerTest, ReportHasTheDocumentedSchema) {
  Trainer t(config());
  const RunResult r = t.run();
  const auto j = report_json(t.facts(r));
  for (const char* key : {"config", "environment", "model", "capture", "steps", "summary",
                          "loss_after_drain", "interrupted", "loader", "warmup", "lr_schedule"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  for (const char* key :
       {"batch_size", "workers", "prefetch_factor", "pin_memory", "work_unit", "reuse_iterator",
        "seed", "device", "image_size", "cudnn_benchmark", "intra_op_threads", "lr", "momentum",
        "weight_decay", "synthetic", "warmup", "steps", "split", "data"}) {
    EXPECT_TRUE(j["config"].contains(key)) << key;
  }
  for (const char* key : {"lr_schedule", "lr_warmup_steps", "label_smoothing", "lr_on_device"}) {
    EXPECT_TRUE(j["config"].contains(key)) << key;
  }
  for (const char* key : {"libtorch", "cuda_runtime", "cudnn", "device_name", "hardware_threads"}) {
    EXPECT_TRUE(j["environment"].contains(key)) << key;
  }
  // CUDA_DEVICE_MAX_CONNECTIONS as the environment has it, null when unset.
  const char* before = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const std::optional<std::string> saved =
      before ? std::optional<std::string>(before) : std::nullopt;
  ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 1);
  EXPECT_EQ(report_json(t.facts(r))["environment"]["cuda_device_max_connections"], "32");
  ::unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  EXPECT_TRUE(report_json(t.facts(r))["environment"]["cuda_device_max_connections"].is_null());
  if (saved) ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", saved->c_str(), 1);
  EXPECT_EQ(j["model"]["parameters"], count_parameters(*t.model()));
  EXPECT_EQ(j["capture"]["warmup_steps"], 2);
  EXPECT_EQ(j["capture"]["steps"], 3);
  EXPECT_EQ(j["capture"]["batch_size"], 4);
  EXPECT_EQ(j["capture"]["reuse_iterator"], true);
  EXPECT_DOUBLE_EQ(j["capture"]["images_per_s"].get<double>(), r.images_per_s);
  ASSERT_EQ(j["steps"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const auto& s = j["steps"][i];
    EXPECT_EQ(s["index"], i);
    EXPECT_EQ(s["digest"], hex64(r.steps[i].digest));
    EXPECT_EQ(s["digest"].get<std::string>().size(), 18u);
    for (const char* key : {"batch_wait_ms", "h2d_submit_ms", "step_ms", "phase_ms", "lr"}) {
      EXPECT_TRUE(s.contains(key)) << key;
    }
    EXPECT_DOUBLE_EQ(s["phase_ms"]["forward"].get<double>(), r.steps[i].phase_ms[3].second);
  }
  EXPECT_TRUE(j["summary"]["phase_ms_p50"].contains("backward"));
  EXPECT_EQ(j["interrupted"], false);
}

// The article's recipe is `--lr-schedule constant --lr 0.1`: the same losses, step for step and
// bit for bit, as the article's loop written out with LibTorch's own SGD (lr 0.1, momentum 0.9,
// weight decay 1e-4) on the same model and batch. The default schedule (a scaled peak, warm-up,
// cosine) trains differently from the second step on, and each step's record holds its LR.
TEST_F(TrainerTest, AConstantScheduleIsTheArticlesRecipeBitForBit) {
  TrainConfig c = config();
  c.data.clear();
  c.synthetic = true;
  c.sync_every_step = true;  // a loss per step
  c.lr_schedule = LrScheduleKind::kConstant;
  c.lr = 0.1;
  const RunResult article = Trainer(c).run();
  std::vector<float> losses;
  for (const auto* steps : {&article.warmup_steps, &article.steps}) {
    for (const StepRecord& r : *steps) {
      ASSERT_TRUE(r.loss && r.lr);
      EXPECT_EQ(*r.lr, 0.1);
      losses.push_back(static_cast<float>(*r.loss));
    }
  }
  ASSERT_EQ(losses.size(), 5u);

  // The reference: the Trainer's model and batch (the same seeds), the article's step by hand.
  torch::manual_seed(c.loader.seed);
  ResNet50 model(101);
  to_channels_last(*model);
  model->train();
  SyntheticInput input(c.loader, 101, torch::kCPU);
  const StepInputs batch = input.submit();
  torch::optim::SGD sgd(model->parameters(),
                        torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-4));
  for (std::size_t k = 0; k < losses.size(); ++k) {
    const torch::Tensor loss =
        torch::nn::functional::cross_entropy(model->forward(batch.images), batch.labels);
    EXPECT_EQ(loss.item<float>(), losses[k]) << "step " << k;
    for (auto& p : model->parameters()) p.mutable_grad().reset();
    loss.backward();
    sgd.step();
  }

  c.lr_schedule = LrScheduleKind::kCosine;
  c.lr.reset();  // the scaled peak: 0.1 x 4 / 256
  Trainer cosine_trainer(c);
  const RunResult cosine = cosine_trainer.run();
  ASSERT_EQ(cosine.warmup_steps.size(), 2u);
  ASSERT_EQ(cosine.steps.size(), 3u);
  const LrSchedule expected(plan_lr(c, 1).options);
  for (int k = 0; k < 5; ++k) {
    const StepRecord& r = k < 2 ? cosine.warmup_steps[k] : cosine.steps[k - 2];
    ASSERT_TRUE(r.lr && r.loss);
    EXPECT_EQ(*r.lr, expected.lr_at(k)) << k;
  }
  EXPECT_EQ(*cosine.warmup_steps[0].loss, losses[0]);  // before any update: the same forward
  EXPECT_NE(*cosine.warmup_steps[1].loss, losses[1]);
  const auto j = report_json(cosine_trainer.facts(cosine));
  EXPECT_EQ(j["lr_schedule"]["kind"], "cosine");
  EXPECT_EQ(j["lr_schedule"]["scaled"], true);
  EXPECT_DOUBLE_EQ(j["lr_schedule"]["lr"].get<double>(), 0.1 * 4 / 256);
  // Eager: the scalar of the article's kernels, the value changing (--cuda-graph reads a table).
  EXPECT_EQ(j["lr_schedule"]["lr_on_device"], false);
  EXPECT_EQ(j["steps"][1]["lr"], expected.lr_at(3));

  // --lr-on-device: the same schedule read from the device table (as a graph reads it). Its
  // product-then-sum rounds apart from the scalar's multiply-add, so only the records and the
  // first update's loss are the same (this tiny run is chaotic, and amplifies the last bits): that
  // loss within 1e-3 of the scalar's. The rounding moved it by 0 to 1.1e-4 over ATen's default,
  // avx2 and avx512 kernels, oneDNN on and off; an LR 0.1% off moves it by 1.6e-2.
  c.lr_on_device = true;
  Trainer table_trainer(c);
  const RunResult table = table_trainer.run();
  ASSERT_EQ(table.steps.size(), 3u);
  for (int k = 0; k < 5; ++k) {
    const StepRecord& r = k < 2 ? table.warmup_steps[k] : table.steps[k - 2];
    ASSERT_TRUE(r.lr) << k;
    EXPECT_EQ(*r.lr, expected.lr_at(k)) << k;
  }
  EXPECT_EQ(*table.warmup_steps[0].loss, *cosine.warmup_steps[0].loss);
  EXPECT_NEAR(*table.warmup_steps[1].loss, *cosine.warmup_steps[1].loss,
              1e-3 * *cosine.warmup_steps[1].loss);
  const auto t = report_json(table_trainer.facts(table));
  EXPECT_EQ(t["lr_schedule"]["lr_on_device"], true);
  EXPECT_EQ(t["config"]["lr_on_device"], true);
}

// --label-smoothing reaches the loss: the first step's (the same weights and batch) is larger.
TEST_F(TrainerTest, LabelSmoothingChangesTheLoss) {
  TrainConfig c = config();
  c.data.clear();
  c.synthetic = true;
  c.warmup = 0;
  c.steps = 1;
  c.sync_every_step = true;
  const RunResult plain = Trainer(c).run();
  c.label_smoothing = 0.2;
  const RunResult smoothed = Trainer(c).run();
  ASSERT_TRUE(plain.steps.at(0).loss && smoothed.steps.at(0).loss);
  EXPECT_NE(*smoothed.steps[0].loss, *plain.steps[0].loss);
}

TEST_F(TrainerTest, SyntheticModeNeedsNoDataset) {
  TrainConfig c = config();
  c.data.clear();
  c.synthetic = true;
  Trainer t(c);
  EXPECT_FALSE(t.input().host_ring().has_value());
  EXPECT_EQ(t.num_classes(), 101);
  const RunResult r = t.run();
  ASSERT_EQ(r.steps.size(), 3u);
  EXPECT_EQ(r.steps[0].digest, r.steps[2].digest);  // the same batch every step
  EXPECT_LT(r.steps[1].batch_wait_ms, 1.0);         // no loader to wait for
}

TEST_F(TrainerTest, StopRequestEndsTheRunEarly) {
  Trainer t(config());
  const RunResult r = t.run([&](const StepRecord& s) {
    if (s.warmup && s.index == 0) t.request_stop(2);
  });
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.interrupt_signal, "SIGINT");  // the Trainer names the signal itself
  EXPECT_EQ(report_json(t.facts(r))["interrupt_signal"], "SIGINT");
  EXPECT_EQ(t.stop_requested(), 2);
  EXPECT_EQ(r.warmup_steps.size(), 1u);
  EXPECT_TRUE(r.steps.empty());
  EXPECT_FALSE(r.capture_started);
}

TEST_F(TrainerTest, StopRequestFromAnotherThreadCutsABatchWaitShort) {
  TrainConfig c = config();
  c.loader.workers = 0;      // every batch is decoded inside batch_wait
  c.loader.batch_size = 24;  // the whole split: a long wait
  c.warmup = 0;
  c.steps = 1000;
  Trainer t(c);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    t.request_stop(15);
  });
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = t.run();
  stopper.join();
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.interrupt_signal, "SIGTERM");
  EXPECT_LT(r.steps.size(), 1000u);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);
}

TEST_F(TrainerTest, StopRequestCutsAnInjectedStallShort) {
  TrainConfig c = config();
  c.warmup = 0;
  c.steps = 2;
  c.inject_stall = {{"forward", 0, 60000.0}};
  Trainer t(c);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    t.request_stop(15);
  });
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = t.run();
  stopper.join();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.interrupt_signal, "SIGTERM");
  ASSERT_EQ(r.steps.size(), 1u);  // the stalled step ends, none starts after it
  EXPECT_EQ(r.steps[0].injected_stalls.size(), 1u);
}

TEST_F(TrainerTest, AStepFailureNamesTheStepAndPhase) {
  // Batch 1 at 32 px leaves BatchNorm one value per channel in layer4: LibTorch refuses in forward.
  TrainConfig c = config();
  c.loader.batch_size = 1;
  try {
    Trainer(c).run();
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("forward of warm-up step 0: ", 0), 0u) << e.what();
    EXPECT_EQ(std::string(e.what()).find("Exception raised from"), std::string::npos) << e.what();
  }
}

TEST_F(TrainerTest, ADataErrorInAStepKeepsTheFileName) {
  test_util::TempDir tmp;
  test_util::make_dataset(tmp.path(), 2, 4, 3, 0.0);
  const auto bad = tmp.path() / "food-101" / "images" / "apple_pie" / "100001.jpg";
  test_util::write_text(bad, "not a jpeg");
  TrainConfig c = config();
  c.data = tmp.path().string();
  c.loader.batch_size = 8;  // every batch holds the bad image
  try {
    Trainer(c).run();
    FAIL() << "expected a DataError";
  } catch (const data_pipeline::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("100001.jpg"), std::string::npos) << e.what();
  }
}

TEST_F(TrainerTest, CudaRunPinsTheRingCapturesAndSeesTheSameBatches) {
  if (!cuda_available()) GTEST_SKIP() << "needs a CUDA device";
  const auto cpu = digests(Trainer(config()).run());
  for (bool copy_stream : {true, false}) {
    TrainConfig c = config();
    c.device = Device::kCuda;
    c.copy_stream = copy_stream;
    Trainer t(c);
    ASSERT_TRUE(t.input().host_ring().has_value());
    EXPECT_TRUE(t.input().host_ring()->pinned);
    const RunResult r = t.run();
    EXPECT_TRUE(r.capture_started);
    EXPECT_EQ(digests(r), cpu) << "copy_stream=" << copy_stream;
    ASSERT_TRUE(r.loss_after_drain.has_value());
    EXPECT_TRUE(std::isfinite(*r.loss_after_drain));
  }
}

// --cuda-graph replays the step the eager loop runs: the same batches and, step by step, the same
// losses within a tolerance (the graph launches the same kernels; only the order of floating-point
// accumulations inside them may differ between runs). The tolerance covers that run-to-run noise.
// So does the graph with its memset nodes left as captured (--cuda-graph-memsets nodes).
TEST_F(TrainerTest, CudaGraphReplaysTheEagerStep) {
  if (!cuda_available()) GTEST_SKIP() << "needs a CUDA device";
  struct Case {
    bool synthetic;
    Precision precision;
    data_pipeline::HostDType dtype;
    data_pipeline::DecodeDevice decode = data_pipeline::DecodeDevice::kCpu;
    // A graph reads each step's LR from a table on the device, and the eager run compared with it
    // does too (--lr-on-device: the same arithmetic); the article's constant LR is a scalar baked
    // into the captured kernels.
    LrScheduleKind schedule = LrScheduleKind::kCosine;
  };
  std::vector<Case> cases = {Case{false, Precision::kFp32, data_pipeline::HostDType::kFloat32},
                             Case{false, Precision::kBf16, data_pipeline::HostDType::kUInt8},
                             Case{true, Precision::kFp32, data_pipeline::HostDType::kFloat32},
                             Case{false, Precision::kFp32, data_pipeline::HostDType::kFloat32,
                                  data_pipeline::DecodeDevice::kCpu, LrScheduleKind::kConstant}};
  // fp16: the loss scaling and the optimizer's skip replayed too (PyTorch's fused SGD reads the
  // flag on the device, LibTorch 2.4 and later).
  if (ForeachSgd({torch::zeros({1}, torch::kCUDA)}, 0.1, 0.9, 0).skips_on_device()) {
    cases.push_back(Case{false, Precision::kFp16, data_pipeline::HostDType::kUInt8});
  }
  if (built(Feature::kGpuDecode)) {
    // The GPU decode stage's device batches, copied into the graph's inputs.
    cases.push_back(Case{false, Precision::kFp32, data_pipeline::HostDType::kFloat32,
                         data_pipeline::DecodeDevice::kGpu});
  }
  for (const Case& k : cases) {
    TrainConfig c = config();
    c.device = Device::kCuda;
    c.synthetic = k.synthetic;
    c.precision = k.precision;
    c.loader.transform.dtype = k.dtype;
    c.loader.decode = k.decode;
    c.lr_schedule = k.schedule;
    c.sync_every_step = true;  // a loss per step
    c.steps = 5;
    c.lr_on_device = true;  // a table for the cosine, the scalar for the constant
    const RunResult eager = Trainer(c).run();
    c.cuda_graph = true;
    const RunResult graph = Trainer(c).run();  // --cuda-graph-memsets kernels, the default
    c.cuda_graph_memsets = GraphMemsets::kNodes;
    const RunResult nodes = Trainer(c).run();
    const std::string what = std::string(k.synthetic ? "synthetic " : "loader ") +
                             to_string(k.precision) + " " + to_string(k.dtype) + " decode " +
                             to_string(k.decode) + " lr " + to_string(k.schedule);
    ASSERT_TRUE(graph.graph_capture_ms.has_value()) << what;
    EXPECT_FALSE(eager.graph_capture_ms.has_value()) << what;
    EXPECT_EQ(digests(graph), digests(eager)) << what;
    ASSERT_EQ(graph.steps.size(), eager.steps.size()) << what;
    const double tolerance = k.precision == Precision::kBf16 ? 2e-2 : 1e-3;
    const double worst = worst_loss_difference(eager, graph, tolerance, what);
    std::cout << "[ calibrate ] " << what << ": worst relative loss difference " << worst
              << " (tolerance " << tolerance << "); memsets as kernels "
              << graph.graph_memset_kernels << ", as nodes " << graph.graph_memset_nodes << "\n";
    // The same graph with its memset nodes replayed as captured: nothing rewritten, as many memsets
    // in all, the same losses (the kernels write what the memsets wrote).
    EXPECT_EQ(nodes.graph_memset_kernels, 0) << what;
    EXPECT_EQ(nodes.graph_memset_nodes, graph.graph_memset_kernels + graph.graph_memset_nodes)
        << what;
    // cuDNN zeroes a few bytes before its convolution and (fp32) BatchNorm kernels in every step,
    // and the rewrite takes them all (none reaches kMaxRewrittenMemsetBytes at this size).
    EXPECT_GT(graph.graph_memset_kernels, 0) << what;
    EXPECT_EQ(graph.graph_memset_nodes, 0) << what;
    ASSERT_EQ(nodes.steps.size(), graph.steps.size()) << what;
    for (std::size_t i = 0; i < graph.steps.size(); ++i) {
      EXPECT_NEAR(*nodes.steps[i].loss, *graph.steps[i].loss,
                  tolerance * std::max(1.0, std::abs(*graph.steps[i].loss)))
          << what << ", memset nodes, step " << i;
    }
    // The losses change from step to step: the replays train (a graph replaying one stale step,
    // or none, would not).
    EXPECT_NE(*graph.steps.front().loss, *graph.steps.back().loss) << what;
    ASSERT_TRUE(graph.loss_after_drain.has_value()) << what;
    EXPECT_FLOAT_EQ(*graph.loss_after_drain, *graph.steps.back().loss) << what;
  }
}

TEST_F(TrainerTest, ADataParallelGraphOnGlooIsRefusedBeforeTheRendezvous) {
  if (!cuda_available()) GTEST_SKIP() << "needs a CUDA device";
  TrainConfig c = config();
  c.device = Device::kCuda;
  c.cuda_graph = true;
  c.warmup = kDdpGraphWarmup;
  c.dist_backend = DistBackend::kGloo;
  LaunchEnv env;  // nobody serves this store: a rendezvous would fail, not refuse
  env.world_size = 2;
  env.master_addr = "127.0.0.1";
  env.master_port = 1;
  try {
    Trainer t(c, env);
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--cuda-graph: a data-parallel graph needs "
                                         "--dist-backend nccl"),
              std::string::npos)
        << e.what();
  }
}

// One NCCL rank, eager DDP against the graph of its step (captured after 11 eager iterations, its
// all-reduces and the copies into the gradients inside), on the same batches: the same losses step
// by step within run-to-run accumulation noise, as on one process without DDP.
TEST_F(TrainerTest, ACudaGraphOfTheDataParallelStepTrainsAsEagerDdp) {
  if (!cuda_available()) GTEST_SKIP() << "needs a CUDA device";
  if (!built(Feature::kNccl)) GTEST_SKIP() << "this build has no NCCL";
  static int port = 29700 + static_cast<int>(::getpid() % 500) * 2;
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    TrainConfig c = config();
    c.device = Device::kCuda;
    c.dist_backend = DistBackend::kNccl;
    c.precision = precision;
    c.warmup = kDdpGraphWarmup;
    c.steps = 5;
    c.sync_every_step = true;  // a loss per step
    c.lr_on_device = true;     // the eager run reads the schedule's LR as the graph does
    auto run = [&](bool graph) {
      c.cuda_graph = graph;
      LaunchEnv env;
      env.master_addr = "127.0.0.1";
      env.master_port = port++;
      return Trainer(c, env).run();
    };
    const RunResult eager = run(false), graph = run(true);
    const std::string what = to_string(precision);
    ASSERT_TRUE(graph.graph_capture_ms.has_value()) << what;
    EXPECT_FALSE(eager.graph_capture_ms.has_value()) << what;
    EXPECT_EQ(digests(graph), digests(eager)) << what;
    ASSERT_EQ(graph.steps.size(), eager.steps.size()) << what;
    ASSERT_TRUE(graph.parameter_digest.has_value()) << what;
    const double tolerance = precision == Precision::kBf16 ? 2e-2 : 1e-3;
    const double worst = worst_loss_difference(eager, graph, tolerance, what);
    // The replays train: a graph replaying one stale step, or none, would repeat its loss.
    EXPECT_NE(*graph.steps.front().loss, *graph.steps.back().loss) << what;
    std::cout << "[ calibrate ] DDP " << what << ": worst relative loss difference " << worst
              << " (tolerance " << tolerance << ")\n";
  }
}

// --precision bf16 or fp16 in one process casts the weights together unless told otherwise, and
// trains as autocast's own casts do: the same batches, the same losses (cuDNN's algorithms may
// differ run to run in the last bits; lib/model's test compares the two to the bit with
// deterministic cuDNN). fp16 scales the loss the same way either way.
TEST_F(TrainerTest, WeightsCastTogetherTrainAsAutocastsOwnCasts) {
  if (!cuda_available()) GTEST_SKIP() << "needs a CUDA device";
  for (const Precision precision : {Precision::kBf16, Precision::kFp16}) {
    SCOPED_TRACE(to_string(precision));
    TrainConfig c = config();
    c.device = Device::kCuda;
    c.precision = precision;
    c.sync_every_step = true;  // a loss per step
    auto run = [&](WeightCast w, const char* expected) {
      c.weight_cast = w;
      Trainer t(c);
      EXPECT_EQ(t.model()->cast_weights_together(), std::string(expected) == "together");
      const RunResult r = t.run();
      EXPECT_EQ(report_json(t.facts(r))["model"]["weight_cast"], expected);
      return r;
    };
    const RunResult together = run(WeightCast::kAuto, "together");
    const RunResult per_layer = run(WeightCast::kPerLayer, "per-layer");
    EXPECT_EQ(digests(together), digests(per_layer));
    const double worst = worst_loss_difference(per_layer, together, 1e-3, "weight casts");
    std::cout << "[ calibrate ] " << to_string(precision)
              << " weights cast together against per layer: worst relative loss difference "
              << worst << "\n";
  }
}

TEST_F(TrainerTest, CudaDeviceWithoutAGpuIsRejected) {
#if !defined(WORKLOAD_TORCH_CUDA)
  TrainConfig c = config();
  c.device = Device::kCuda;
  EXPECT_THROW(Trainer{c}, UsageError);
#else
  GTEST_SKIP() << "CUDA build";
#endif
}

}  // namespace
}  // namespace workload
