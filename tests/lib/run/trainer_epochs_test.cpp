// Tests for the Trainer's --epochs runs on the CPU: a tiny split learnt above chance on the
// schedule's formula, --eval-every, resume equality, bad checkpoints, and a capture window across
// an epoch's end.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data_pipeline/data_error.h"
#include "lib/core/usage_error.h"
#include "lib/device/cuda_device.h"
#include "lib/report/report.h"
#include "lib/run/checkpoint.h"
#include "lib/run/outcome.h"
#include "lib/run/trainer.h"
#include "tests/support/test_util.h"

namespace workload {
namespace {

namespace fs = std::filesystem;

constexpr double kPi = 3.14159265358979323846;

class TrainerEpochsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new test_util::TempDir();
    // 3 classes, 24 training and 8 test images each, the class signal at its strongest.
    test_util::make_dataset(tmp_->path() / "data", 3, 32, 5, 0.25, 1.0);
  }
  static void TearDownTestSuite() { delete tmp_; }
  static TrainConfig config(int epochs) {
    TrainConfig c;
    c.data = (tmp_->path() / "data").string();
    c.device = Device::kCpu;
    c.loader.batch_size = 8;  // 9 steps an epoch
    c.loader.transform.image_size = 32;
    c.loader.workers = 2;
    c.loader.seed = 2;
    c.intra_op_threads = 2;  // CI's cores; the run is still deterministic
    c.epochs = epochs;
    c.quiet = true;
    return c;
  }
  static fs::path dir(const std::string& name) { return tmp_->path() / name; }
  static test_util::TempDir* tmp_;
};
test_util::TempDir* TrainerEpochsTest::tmp_ = nullptr;

// The median of the steps' losses in [first, last).
double median_loss(const std::vector<StepRecord>& steps, std::size_t first, std::size_t last) {
  std::vector<double> losses;
  for (std::size_t i = first; i < last; ++i) losses.push_back(steps[i].loss.value());
  std::sort(losses.begin(), losses.end());
  return losses[losses.size() / 2];
}

// The lowest of the steps' losses in [first, last).
double lowest_loss(const std::vector<StepRecord>& steps, std::size_t first, std::size_t last) {
  double lowest = steps[first].loss.value();
  for (std::size_t i = first + 1; i < last; ++i) lowest = std::min(lowest, steps[i].loss.value());
  return lowest;
}

// What the run learns is chaotic: any difference in rounding (another ATen capability, oneDNN's
// convolutions or LibTorch's own, another thread count, another CPU, since oneDNN picks its kernels
// from the CPU itself) takes it elsewhere, so the bars are those that runs over the kernel paths
// met with room to spare (docs/BENCHMARKS.md, "Learning tests across CPU kernel paths" and "The
// loss bar on an AMD EPYC"). No typical step loss is such a figure: the images are flat class
// colours, so a batch of 8 normalised by its own statistics mistakes an image of a class it holds
// once (a 4/3/1 batch), and once the logits are in the tens that one image costs more than the
// other seven together. On an AMD EPYC (avx2, oneDNN, seed 5) the last epoch's median step loss was
// 1.06 times the first's, while that run's evaluation reached a top-1 of 1.0. What all 24 runs
// there did is fit some whole batch of the last epoch: its lowest step loss was at most 0.051 of
// the first epoch's median (and at most the median, 0.114 of it, in the 30 runs before). A run
// that learns nothing (an LR of 1e-9) stays at 0.83 of it.
TEST_F(TrainerEpochsTest, TheDefaultRecipeLearnsATinySplitAboveChance) {
  TrainConfig c = config(8);  // the default recipe: scaled peak, 25% warm-up, cosine
  c.sync_every_step = true;   // every step's loss (the same steps, read on the host)
  Trainer t(c);
  ASSERT_EQ(t.steps_per_epoch(), 9);
  ASSERT_EQ(t.eval_steps_per_pass(), 3);
  const RunResult r = t.run();
  ASSERT_EQ(r.epochs.size(), 8u);
  ASSERT_EQ(r.steps.size(), 72u);  // no capture window: every step in `steps`
  for (const EpochRecord& e : r.epochs) {
    ASSERT_TRUE(e.eval) << "epoch " << e.epoch;
    EXPECT_EQ(e.eval->images, 24) << "every test image once";
    EXPECT_EQ(e.eval->top5, 1.0) << "3 classes: the top 5 hold them all";
    EXPECT_TRUE(std::isfinite(e.train_loss));
    EXPECT_GT(e.images_per_s, 0);
  }
  // Chance is 1/3; every run reached 2/3 or more at some epoch and ended at 0.62 or more.
  ASSERT_TRUE(r.best_top1);
  EXPECT_GE(*r.best_top1, 0.6);
  EXPECT_GE(r.epochs.back().eval->top1, 0.5);
  EXPECT_GE(*r.best_top1, r.epochs.back().eval->top1);
  // The last epoch's best step against the first epoch's typical one: at most 0.051 of it.
  const double first = median_loss(r.steps, 0, 9), best_last = lowest_loss(r.steps, 63, 72);
  EXPECT_LT(best_last, first / 4) << "first epoch's median step loss " << first
                                  << ", last epoch's lowest " << best_last;
  // The report's training section.
  const auto j = report_json(t.facts(r));
  ASSERT_TRUE(j.contains("training"));
  EXPECT_EQ(j["training"]["epochs"].size(), 8u);
  EXPECT_EQ(j["training"]["epochs"][7]["eval"]["images"], 24);
  EXPECT_EQ(j["steps"][71]["step"], 71);
  // The schedule spans the 8 epochs as its formula says: the scaling rule's peak, a warm-up of 25%
  // of the 72 steps, then the cosine to 0.
  const double peak = 0.1 * 8 / 256;
  const int total = 72, warm = 18;
  for (int s : {0, 9, 17, 18, 27, 40, 63, 71}) {
    const double want = s < warm ? peak * (s + 1) / warm
                                 : peak * (1 + std::cos(kPi * (s - warm) / (total - warm))) / 2;
    const StepRecord& step = r.steps[static_cast<std::size_t>(s)];
    ASSERT_TRUE(step.lr);
    EXPECT_NEAR(*step.lr, want, 1e-12) << "step " << s;
    EXPECT_EQ(step.step, s);
    EXPECT_EQ(step.epoch, s / 9) << "the loader's epoch";
  }
}

TEST_F(TrainerEpochsTest, EvalEveryNSkipsTheOthersButTheLast) {
  TrainConfig c = config(3);
  c.eval_every = 2;
  c.loader.batch_size = 24;  // 3 steps an epoch
  const RunResult r = Trainer(c).run();
  ASSERT_EQ(r.epochs.size(), 3u);
  EXPECT_FALSE(r.epochs[0].eval);
  EXPECT_TRUE(r.epochs[1].eval);
  EXPECT_TRUE(r.epochs[2].eval) << "the last epoch is always evaluated";
}

TEST_F(TrainerEpochsTest, AResumedRunGivesTheUninterruptedRunsStepsBitForBit) {
  TrainConfig c = config(3);
  c.sync_every_step = true;  // every step's loss
  c.checkpoint_dir = dir("resume").string();
  Trainer full(c);
  const RunResult whole = full.run();
  ASSERT_EQ(whole.epochs.size(), 3u);
  ASSERT_TRUE(whole.epochs[2].checkpoint);
  const CheckpointDir ckpt(c.checkpoint_dir);
  // The run "died" during epoch 3: only the checkpoint after epoch 2 remains.
  fs::remove(ckpt.file_for(3));
  ASSERT_EQ(ckpt.newest(), ckpt.file_for(2));

  c.resume = true;
  Trainer resumed(c);
  EXPECT_EQ(resumed.first_epoch(), 2);
  EXPECT_EQ(resumed.resumed_from(), ckpt.file_for(2));
  const RunResult rest = resumed.run();
  ASSERT_EQ(rest.steps.size(), 9u);
  for (std::size_t i = 0; i < 9; ++i) {
    const StepRecord& a = whole.steps[18 + i];
    const StepRecord& b = rest.steps[i];
    EXPECT_EQ(b.step, a.step);
    EXPECT_EQ(b.digest, a.digest) << "step " << *a.step << ": the same batch";
    ASSERT_TRUE(a.loss && b.loss);
    EXPECT_EQ(*b.loss, *a.loss) << "step " << *a.step;
    EXPECT_EQ(*b.lr, *a.lr);
  }
  ASSERT_EQ(rest.epochs.size(), 3u);
  EXPECT_TRUE(rest.epochs[0].resumed && rest.epochs[1].resumed && !rest.epochs[2].resumed);
  ASSERT_TRUE(rest.epochs[2].eval && whole.epochs[2].eval);
  EXPECT_EQ(rest.epochs[2].eval->top1, whole.epochs[2].eval->top1);
  EXPECT_EQ(rest.epochs[2].eval->loss, whole.epochs[2].eval->loss);
  EXPECT_EQ(rest.epochs[2].train_loss, whole.epochs[2].train_loss);
  const auto a = full.model()->named_parameters();
  const auto b = resumed.model()->named_parameters();
  for (const auto& p : a) {
    EXPECT_TRUE(torch::equal(p.value(), b[p.key()])) << p.key();
  }
  for (const auto& buf : full.model()->named_buffers()) {
    EXPECT_TRUE(torch::equal(buf.value(), resumed.model()->named_buffers()[buf.key()]))
        << buf.key();
  }
  EXPECT_EQ(rest.resumed_from, ckpt.file_for(2));

  // A run that already did every epoch resumes to nothing.
  Trainer done(c);
  EXPECT_EQ(done.first_epoch(), 3);
  EXPECT_TRUE(done.run().steps.empty());
}

// --precision fp16 on a GPU: the epochs train with the loss scaled, the checkpoint keeps the
// scaler's state, and a resumed run starts from it (its skipped steps counted on from there) and
// reports where the scale ended.
TEST_F(TrainerEpochsTest, AnFp16RunKeepsItsLossScalingInTheCheckpointAndResumesIt) {
  if (!cuda_available()) GTEST_SKIP() << "needs a CUDA device";
  TrainConfig c = config(3);
  c.device = Device::kCuda;
  c.precision = Precision::kFp16;
  c.checkpoint_dir = dir("fp16").string();
  // The subject is the scaler's state, whatever the tiny model's fp16 loss does: on an H100 its
  // first evaluation's loss was NaN (its cause not yet found), which ends a run that does not
  // allow it.
  c.allow_nonfinite_loss = true;
  Trainer first(c);
  const RunResult r = first.run();
  ASSERT_EQ(r.epochs.size(), 3u) << "non-finite: '" << r.nonfinite_loss << "', interrupted "
                                 << r.interrupted << ", aborted '" << r.aborted << "'";
  if (!r.nonfinite_loss.empty()) std::printf("[ fp16     ] %s\n", r.nonfinite_loss.c_str());
  const RunFacts facts = first.facts(r);
  ASSERT_TRUE(facts.loss_scaling.has_value());
  const LossScaler::State end = facts.loss_scaling->state;
  EXPECT_GT(end.scale, 0);
  EXPECT_LE(end.skipped_steps, 27) << "at most every step of the run";
  const CheckpointDir ckpt(c.checkpoint_dir);
  const Checkpoint last = read_checkpoint_file(ckpt.file_for(3));
  ASSERT_TRUE(last.meta.contains("loss_scaler"));
  EXPECT_EQ(last.meta["loss_scaler"]["scale"].get<double>(), end.scale);
  EXPECT_EQ(last.meta["loss_scaler"]["skipped_steps"].get<std::int64_t>(), end.skipped_steps);
  EXPECT_EQ(report_json(facts)["loss_scaling"]["final_scale"].get<double>(), end.scale);
  // Each epoch records the scale at its end, the skipped steps so far, and which they were: the
  // steps whose found-inf flag was set, in order, as many as the scaler counted.
  const std::int64_t spe = first.steps_per_epoch();
  for (std::size_t k = 0; k < r.epochs.size(); ++k) {
    const EpochRecord& e = r.epochs[k];
    ASSERT_TRUE(e.loss_scale.has_value()) << "epoch " << k;
    EXPECT_EQ(static_cast<std::int64_t>(e.skipped_at.size()), e.skipped_steps) << "epoch " << k;
    EXPECT_TRUE(std::is_sorted(e.skipped_at.begin(), e.skipped_at.end())) << "epoch " << k;
    for (const std::int64_t s : e.skipped_at) {
      EXPECT_GE(s, 0);
      EXPECT_LT(s, (static_cast<std::int64_t>(k) + 1) * spe) << "epoch " << k;
    }
  }
  EXPECT_EQ(*r.epochs.back().loss_scale, end.scale);
  EXPECT_EQ(r.epochs.back().skipped_steps, end.skipped_steps);
  std::printf("[ fp16     ] skipped steps: %zu, scale %g\n", r.epochs.back().skipped_at.size(),
              end.scale);

  // The run "died" during epoch 3: it resumes from epoch 2's checkpoint and its scaler.
  const Checkpoint second = read_checkpoint_file(ckpt.file_for(2));
  ASSERT_TRUE(second.meta.contains("loss_scaler"));
  const double saved_scale = second.meta["loss_scaler"]["scale"].get<double>();
  const auto saved_skips = second.meta["loss_scaler"]["skipped_steps"].get<std::int64_t>();
  fs::remove(ckpt.file_for(3));
  c.resume = true;
  Trainer resumed(c);
  const RunResult rest = resumed.run();
  ASSERT_EQ(rest.epochs.size(), 3u);
  const LossScaler::State after = resumed.facts(rest).loss_scaling->state;
  // Growth needs 2000 clean steps, so within these 9 the scale only halves: from the saved one,
  // not from a fresh scaler's 65536 (which the first two epochs' skips, if any, left behind).
  EXPECT_GE(after.skipped_steps, saved_skips) << "counted on from the checkpoint";
  EXPECT_LE(after.scale, saved_scale) << "continued from the checkpoint's scale";
  ASSERT_TRUE(rest.epochs[2].eval);
  // The resumed epochs' skipped steps come back from the checkpoint, and the new epoch's follow.
  EXPECT_EQ(rest.epochs[1].skipped_at, r.epochs[1].skipped_at);
  const std::vector<std::int64_t>& all = rest.epochs[2].skipped_at;
  ASSERT_GE(all.size(), r.epochs[1].skipped_at.size());
  EXPECT_TRUE(
      std::equal(r.epochs[1].skipped_at.begin(), r.epochs[1].skipped_at.end(), all.begin()));
  EXPECT_EQ(static_cast<std::int64_t>(all.size()), after.skipped_steps);
}

TEST_F(TrainerEpochsTest, BadCheckpointsAreErrorsNamingTheFile) {
  TrainConfig c = config(1);
  c.eval_every = 0;
  c.checkpoint_dir = dir("bad").string();
  Trainer(c).run();
  const CheckpointDir ckpt(c.checkpoint_dir);
  const std::string newest = ckpt.file_for(1);
  ASSERT_TRUE(fs::exists(newest));
  c.resume = true;
  const auto message = [&](const TrainConfig& cfg) -> std::string {
    try {
      Trainer t(cfg);
    } catch (const CheckpointError& e) {
      return e.what();
    }
    return "no CheckpointError";
  };
  // Another run's settings.
  TrainConfig other = c;
  other.loader.seed = 3;
  other.loader.batch_size = 4;
  std::string m = message(other);
  EXPECT_NE(m.find(newest), std::string::npos) << m;
  EXPECT_NE(m.find("seed: checkpoint 2, run 3"), std::string::npos) << m;
  EXPECT_NE(m.find("batch_size: checkpoint 8, run 4"), std::string::npos) << m;
  // Truncated.
  std::string bytes;
  {
    std::ifstream in(newest, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  {
    std::ofstream out(newest, std::ios::binary | std::ios::trunc);
    out << bytes.substr(0, bytes.size() - 1000);
  }
  m = message(c);
  EXPECT_NE(m.find(newest), std::string::npos) << m;
  EXPECT_NE(m.find("truncated"), std::string::npos) << m;
  // Foreign.
  {
    std::ofstream out(newest, std::ios::binary | std::ios::trunc);
    out << "not a checkpoint at all";
  }
  m = message(c);
  EXPECT_NE(m.find("not a train_resnet50 checkpoint"), std::string::npos) << m;
}

TEST_F(TrainerEpochsTest, TheCaptureWindowSpansAnEpochsEndWhereverItIsPut) {
  TrainConfig c = config(2);
  c.capture_at = 7;  // the last two steps of epoch 0, its evaluation, the first two of epoch 1
  c.steps = 4;
  c.checkpoint_dir = dir("window").string();
  Trainer t(c);
  const RunResult r = t.run();
  ASSERT_EQ(r.warmup_steps.size(), 7u);
  ASSERT_EQ(r.steps.size(), 4u);
  ASSERT_EQ(r.steps_after_capture.size(), 7u);
  EXPECT_EQ(r.steps[0].step, 7);
  EXPECT_EQ(r.steps[0].index, 0);
  EXPECT_FALSE(r.steps[0].warmup);
  EXPECT_EQ(r.steps[3].step, 10);
  EXPECT_EQ(r.steps[3].epoch, 1);
  EXPECT_EQ(r.steps_after_capture[0].step, 11);
  ASSERT_EQ(r.epochs.size(), 2u);
  EXPECT_TRUE(r.epochs[0].eval && r.epochs[0].checkpoint);
  EXPECT_GT(r.epochs[0].checkpoint->bytes, 0u);
  EXPECT_GT(r.elapsed_s, r.epochs[0].eval->ms / 1000.0) << "the window holds the evaluation";
  const auto j = report_json(t.facts(r));
  EXPECT_EQ(j["steps_after_capture"].size(), 7u);
  EXPECT_EQ(j["capture"]["steps"], 4);
}

// The message of the `Error` that constructing a Trainer of `c` throws ("no Error" when none).
template <typename Error>
std::string construction_error(const TrainConfig& c) {
  try {
    Trainer t(c);
  } catch (const Error& e) {
    return e.what();
  }
  return "no Error";
}

TEST_F(TrainerEpochsTest, ARunOwnsItsCheckpointDirectory) {
  TrainConfig c = config(1);
  c.eval_every = 0;
  c.checkpoint_dir = dir("owned").string();
  Trainer(c).run();
  const CheckpointDir ckpt(c.checkpoint_dir);
  ASSERT_TRUE(fs::exists(ckpt.file_for(1)));
  // A run that does not resume: refused at the start, naming the ways on; nothing is deleted.
  std::string m = construction_error<UsageError>(c);
  EXPECT_NE(m.find("--checkpoint-dir " + c.checkpoint_dir + ": holds checkpoints (1, the newest " +
                   ckpt.file_for(1) +
                   "); --resume to continue their run, --start-over to delete "
                   "them, or another directory"),
            std::string::npos)
      << m;
  EXPECT_TRUE(fs::exists(ckpt.file_for(1)));
  // --start-over deletes them and trains from the first epoch.
  c.start_over = true;
  {
    Trainer again(c);
    EXPECT_EQ(again.first_epoch(), 0);
    EXPECT_FALSE(fs::exists(ckpt.file_for(1)));
    EXPECT_NE(std::find(again.notices().begin(), again.notices().end(),
                        "--start-over: deleted 1 checkpoint(s) in " + c.checkpoint_dir),
              again.notices().end());
    again.run();
  }
  EXPECT_TRUE(fs::exists(ckpt.file_for(1)));
  // While a run holds the directory (from its construction to the end of its run), no other gets
  // it: refused, naming the holder.
  c.start_over = false;
  c.resume = true;
  Trainer holder(c);
  m = construction_error<UsageError>(c);
  EXPECT_NE(m.find("another run is writing checkpoints there (pid " + std::to_string(::getpid())),
            std::string::npos)
      << m;
  holder.run();
  EXPECT_EQ(construction_error<UsageError>(c), "no Error") << "free once the run has ended";
}

TEST_F(TrainerEpochsTest, AResumedRunMustBeTheCheckpointsRunOnTheSameData) {
  TrainConfig c = config(2);
  c.eval_every = 0;
  c.checkpoint_dir = dir("same").string();
  Trainer(c).run();
  const CheckpointDir ckpt(c.checkpoint_dir);
  c.resume = true;
  // A longer run: its schedule would differ; the flag is named, with the value that resumes.
  TrainConfig longer = c;
  longer.epochs = 3;
  std::string m = construction_error<UsageError>(longer);
  EXPECT_NE(m.find("--epochs 3: " + ckpt.file_for(2) + " is a run of 2 epochs"), std::string::npos)
      << m;
  EXPECT_NE(m.find("pass --epochs 2"), std::string::npos) << m;
  // Another warm-up over as many steps: named as the field, not as --epochs.
  TrainConfig warmup = c;
  warmup.lr_warmup_steps = 3;
  m = construction_error<CheckpointError>(warmup);
  EXPECT_NE(m.find("made by another run (lr_warmup_steps: checkpoint"), std::string::npos) << m;
  EXPECT_EQ(m.find("--epochs"), std::string::npos) << m;
  // Another dataset of as many images.
  TrainConfig other = c;
  other.data = (tmp_->path() / "other").string();
  test_util::make_dataset(other.data, 3, 32, 6, 0.25, 1.0);
  m = construction_error<CheckpointError>(other);
  EXPECT_NE(m.find("made by another run (train_split: checkpoint"), std::string::npos) << m;
  // A file whose name does not say its epoch.
  fs::rename(ckpt.file_for(2), ckpt.file_for(3));
  m = construction_error<CheckpointError>(c);
  EXPECT_NE(
      m.find(ckpt.file_for(3) + ": holds the run after 2 epochs, which its name does not say"),
      std::string::npos)
      << m;
  // An empty newest file beside a whole older one: the older one is named.
  fs::remove(ckpt.file_for(3));
  Trainer(TrainConfig(c)).run();  // resumes after epoch 1: the checkpoint after epoch 2 again
  ASSERT_TRUE(fs::exists(ckpt.file_for(2)));
  fs::resize_file(ckpt.file_for(2), 0);
  m = construction_error<CheckpointError>(c);
  EXPECT_NE(m.find(ckpt.file_for(2) + ": not a train_resnet50 checkpoint"), std::string::npos) << m;
  EXPECT_NE(m.find("the one before it, " + ckpt.file_for(1) + ", may be whole"), std::string::npos)
      << m;
}

TEST_F(TrainerEpochsTest, TheCaptureWindowIsCheckedAgainstTheRun) {
  TrainConfig c = config(1);  // steps 0 to 8
  c.eval_every = 0;
  c.capture_at = 9;
  EXPECT_NE(construction_error<UsageError>(c).find(
                "--capture-at 9: the run's steps are 0 to 8 (1 epochs of 9), so the window would "
                "never open"),
            std::string::npos);
  c.capture_at = 6;
  c.steps = 4;
  EXPECT_NE(construction_error<UsageError>(c).find("--capture-at 6 --steps 4: the window would end "
                                                   "at step 9"),
            std::string::npos);
  c.steps = 3;
  EXPECT_EQ(construction_error<UsageError>(c), "no Error");
}

// A loss that is not finite ends the run at its epoch's end, before the evaluation and the
// checkpoint, naming the first such step; with --allow-nonfinite-loss the run goes on, and no
// target is reached.
TEST_F(TrainerEpochsTest, ANonFiniteLossStopsTheRunNamingItsStep) {
  TrainConfig c = config(2);
  c.lr_schedule = LrScheduleKind::kConstant;
  c.lr = 1e6;
  c.checkpoint_dir = dir("nan").string();
  const RunResult r = Trainer(c).run();
  EXPECT_TRUE(r.nonfinite_stopped);
  EXPECT_NE(r.nonfinite_loss.find(" (epoch 0): loss "), std::string::npos) << r.nonfinite_loss;
  EXPECT_EQ(r.nonfinite_loss.rfind("step ", 0), 0u) << r.nonfinite_loss;
  EXPECT_TRUE(r.epochs.empty()) << "the epoch is neither evaluated nor saved";
  EXPECT_FALSE(CheckpointDir(c.checkpoint_dir).newest());
  const Outcome o = run_outcome(r, -1, -1, "train_resnet50", "r.json");
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.message.find("train_resnet50: error: a loss that is not finite, at step "),
            std::string::npos)
      << o.message;

  c.checkpoint_dir = dir("nan_allowed").string();
  c.allow_nonfinite_loss = true;
  c.target_top1 = 0.0;  // every evaluation would reach it
  const RunResult a = Trainer(c).run();
  EXPECT_FALSE(a.nonfinite_stopped);
  EXPECT_FALSE(a.nonfinite_loss.empty());
  EXPECT_EQ(a.epochs.size(), 2u);
  EXPECT_FALSE(a.target_reached) << "a run with a non-finite loss reaches no target";
  EXPECT_EQ(run_outcome(a, -1, -1, "train_resnet50", "").status, 0);

  // Its checkpoints hold those losses (as null: JSON has no NaN), and it resumes from them.
  const CheckpointDir ckpt(c.checkpoint_dir);
  fs::remove(ckpt.file_for(2));
  c.resume = true;
  const RunResult rest = Trainer(c).run();
  ASSERT_EQ(rest.epochs.size(), 2u);
  EXPECT_TRUE(rest.epochs[0].resumed);
  EXPECT_FALSE(std::isfinite(rest.epochs[0].train_loss)) << "read back as not finite";
  EXPECT_EQ(rest.epochs[0].steps, a.epochs[0].steps);
  EXPECT_NE(rest.nonfinite_loss.find("epoch 0 (read from the checkpoint): loss "),
            std::string::npos)
      << rest.nonfinite_loss;
  EXPECT_FALSE(rest.target_reached) << "the resumed run of a run with a non-finite loss";
}

// A stop during the evaluation keeps the epoch's training: recorded without the evaluation and
// saved, then the run stops.
TEST_F(TrainerEpochsTest, AStopDuringTheEvaluationKeepsTheEpochsTraining) {
  TrainConfig c = config(2);
  c.checkpoint_dir = dir("stop_in_eval").string();
  Trainer t(c);
  const RunResult r = t.run([&t](const StepRecord& s) {
    if (s.step == 8) t.request_stop(SIGTERM);  // the epoch's last step: its evaluation is next
  });
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_TRUE(r.epochs[0].eval_cut);
  EXPECT_FALSE(r.epochs[0].eval);
  ASSERT_TRUE(r.epochs[0].checkpoint);
  EXPECT_TRUE(fs::exists(r.epochs[0].checkpoint->path));
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.steps.size(), 9u);
  EXPECT_EQ(report_json(t.facts(r))["training"]["epochs"][0]["eval_cut"], true);
}

// The evaluation's images: one it cannot read is named as the evaluation's; under --on-bad-image
// skip it is left out of every count (the image put in its place is not counted twice) and listed.
TEST_F(TrainerEpochsTest, AnUnreadableTestImageIsTheEvaluationsAndNeverCountedTwice) {
  const fs::path data = tmp_->path() / "bad_test_image";
  test_util::make_dataset(data, 3, 32, 5, 0.25, 1.0);
  std::string first_test;
  {
    std::ifstream in(data / "food-101" / "meta" / "test.txt");
    std::getline(in, first_test);
  }
  const fs::path bad = data / "food-101" / "images" / (first_test + ".jpg");
  test_util::write_text(bad, "not a jpeg");
  TrainConfig c = config(1);
  c.data = data.string();
  try {
    Trainer(c).run();
    FAIL() << "no DataError";
  } catch (const data_pipeline::DataError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("the evaluation after epoch 0: ", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find(bad.string()), std::string::npos) << e.what();
  }
  c.loader.on_bad_image = data_pipeline::BadImagePolicy::kSkip;
  Trainer t(c);
  const RunResult r = t.run();
  ASSERT_EQ(r.epochs.size(), 1u);
  ASSERT_TRUE(r.epochs[0].eval);
  EXPECT_EQ(r.epochs[0].eval->images, 23) << "24 test images, one unreadable";
  EXPECT_EQ(r.epochs[0].eval->skipped, std::vector<std::string>{bad.string()});
  const auto j = report_json(t.facts(r));
  EXPECT_EQ(j["training"]["epochs"][0]["eval"]["skipped_images"][0], bad.string());
}

}  // namespace
}  // namespace workload
