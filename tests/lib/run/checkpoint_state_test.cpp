// Tests for what a checkpoint holds, without a Trainer: the tensors' names, a model and an
// optimizer put back exactly, every mismatch named, the fingerprint's fields and the epochs'
// records.
#include "lib/run/checkpoint_state.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace workload {
namespace {

// A small model with parameters, a parameter without gradients (so without momentum) and buffers.
struct Tiny : torch::nn::Module {
  Tiny() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)));
    bn = register_module("bn", torch::nn::BatchNorm2d(4));
    fc = register_module("fc", torch::nn::Linear(4, 2));
    frozen = register_parameter("frozen", torch::ones({2}), /*requires_grad=*/false);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc(torch::relu(bn(conv(x))).mean({2, 3})) + frozen;
  }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  torch::nn::Linear fc{nullptr};
  torch::Tensor frozen;
};

// Two SGD steps of `model` on fixed data: moved weights, running statistics and momentum.
void train_two_steps(Tiny& model, ForeachSgd& sgd) {
  torch::manual_seed(3);
  for (int i = 0; i < 2; ++i) {
    const torch::Tensor x = torch::randn({2, 3, 6, 6});
    model.zero_grad();
    model.forward(x).sum().backward();
    sgd.step();
  }
}

std::vector<torch::Tensor> trainable(Tiny& model) {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& p : model.parameters()) out.push_back(p);
  return out;
}

bool same_state(Tiny& a, Tiny& b) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) {
    if (!torch::equal(pa[i].value(), pb[i].value())) return false;
  }
  const auto ba = a.named_buffers(), bb = b.named_buffers();
  for (std::size_t i = 0; i < ba.size(); ++i) {
    if (!torch::equal(ba[i].value(), bb[i].value())) return false;
  }
  return true;
}

std::string checkpoint_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no CheckpointError";
  return "";
}

TEST(CheckpointStateTest, AModelAndItsOptimizerArePutBackExactly) {
  Tiny trained;
  ForeachSgd sgd(trainable(trained), 0.1, 0.9, 1e-4);
  train_two_steps(trained, sgd);
  std::vector<EpochRecord> epochs(1);
  epochs[0].epoch = 0;
  epochs[0].train_loss = 1.5;
  const Checkpoint c = make_checkpoint({{"seed", 7}}, 1, epochs, 12.5, trained, sgd.state());
  EXPECT_EQ(c.meta["epochs_done"], 1);
  EXPECT_EQ(c.meta["optimizer_steps_done"], 2);
  EXPECT_EQ(c.meta["elapsed_s"], 12.5);
  EXPECT_EQ(c.meta["fingerprint"]["seed"], 7);
  std::vector<std::string> names;
  for (const auto& [name, t] : c.tensors) names.push_back(name);
  for (const char* n : {"param/conv.weight", "param/frozen", "buffer/bn.running_mean",
                        "buffer/bn.num_batches_tracked", "momentum/fc.weight"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
  // A parameter without gradients has no momentum, and none is saved for it.
  EXPECT_EQ(std::find(names.begin(), names.end(), "momentum/frozen"), names.end());

  Tiny restored;
  ForeachSgd restored_sgd(trainable(restored), 0.1, 0.9, 1e-4);
  ASSERT_FALSE(same_state(trained, restored));
  const torch::Tensor weight = restored.conv->weight;  // the model's own tensor, kept
  restore_model(c, "ck", restored);
  restore_optimizer(c, "ck", restored, restored_sgd);
  EXPECT_TRUE(same_state(trained, restored));
  EXPECT_TRUE(weight.is_same(restored.conv->weight));
  EXPECT_EQ(restored_sgd.state().steps, 2);
  // The next step is the same step in both.
  train_two_steps(trained, sgd);
  train_two_steps(restored, restored_sgd);
  EXPECT_TRUE(same_state(trained, restored));
}

TEST(CheckpointStateTest, AMissingOrMismatchedTensorIsNamedWithTheFile) {
  Tiny model;
  ForeachSgd sgd(trainable(model), 0.1, 0.9, 0);
  Checkpoint c = make_checkpoint({}, 1, {}, 0, model, sgd.state());
  const auto named = [](Checkpoint& k, const std::string& name) {
    return std::find_if(k.tensors.begin(), k.tensors.end(),
                        [&](const auto& t) { return t.first == name; });
  };
  Checkpoint missing = c;
  missing.tensors.erase(named(missing, "param/conv.weight"));
  EXPECT_NE(checkpoint_error([&] {
              restore_model(missing, "dir/e1.ckpt", model);
            }).find("checkpoint dir/e1.ckpt: no tensor param/conv.weight"),
            std::string::npos);
  Checkpoint other = c;
  named(other, "param/conv.weight")->second = torch::zeros({1});
  const std::string shape = checkpoint_error([&] { restore_model(other, "e1", model); });
  EXPECT_NE(shape.find("tensor param/conv.weight is"), std::string::npos) << shape;
  EXPECT_NE(shape.find("the model's"), std::string::npos) << shape;
  // Momentum is optional (none before the first step), its shape is not.
  Checkpoint bad_momentum = c;
  bad_momentum.tensors.emplace_back("momentum/fc.weight", torch::zeros({3}));
  EXPECT_NE(checkpoint_error([&] {
              restore_optimizer(bad_momentum, "e1", model, sgd);
            }).find("tensor momentum/fc.weight"),
            std::string::npos);
  EXPECT_NO_THROW(restore_optimizer(c, "e1", model, sgd));
}

// fp16's loss scaling: its state goes into the meta and comes back into a fresh scaler; a
// checkpoint without it, or with a state no scaler can hold, is refused naming the file.
TEST(CheckpointStateTest, TheLossScalingStateIsPutBackAndABadOneNamed) {
  Tiny model;
  ForeachSgd sgd(trainable(model), 0.1, 0.9, 0);
  const LossScaler::State saved{4096.0, 17, 3};
  const Checkpoint c = make_checkpoint({}, 1, {}, 0, model, sgd.state(), &saved);
  ASSERT_TRUE(c.meta.contains("loss_scaler"));
  LossScaler fresh(torch::kCPU);
  restore_scaler(c, "e1.ckpt", fresh);
  const LossScaler::State got = fresh.state();
  EXPECT_EQ(got.scale, 4096.0);
  EXPECT_EQ(got.growth_tracker, 17);
  EXPECT_EQ(got.skipped_steps, 3);

  const Checkpoint without = make_checkpoint({}, 1, {}, 0, model, sgd.state());
  EXPECT_FALSE(without.meta.contains("loss_scaler"));
  EXPECT_NE(checkpoint_error([&] {
              restore_scaler(without, "e1.ckpt", fresh);
            }).find("checkpoint e1.ckpt: no loss scaling state"),
            std::string::npos);
  for (const auto& bad :
       {nlohmann::ordered_json{{"scale", -1.0}, {"growth_tracker", 0}, {"skipped_steps", 0}},
        nlohmann::ordered_json{{"scale", 8.0}, {"growth_tracker", 0}},
        nlohmann::ordered_json{{"scale", "big"}, {"growth_tracker", 0}, {"skipped_steps", 0}}}) {
    Checkpoint broken = c;
    broken.meta["loss_scaler"] = bad;
    EXPECT_NE(checkpoint_error([&] {
                restore_scaler(broken, "e2.ckpt", fresh);
              }).find("checkpoint e2.ckpt: loss_scaler:"),
              std::string::npos)
        << bad.dump();
  }
  EXPECT_EQ(fresh.state().scale, 4096.0) << "a refused state leaves the scaler as it was";
}

TEST(CheckpointStateTest, TheFingerprintHoldsTheRunsSettingsAndTheSplitOnlyWithADirectory) {
  TrainConfig config;
  config.loader.batch_size = 16;
  config.loader.seed = 11;
  LrPlan plan;
  plan.options.total_steps = 40;
  plan.options.peak_lr = 0.05;
  const nlohmann::ordered_json f = run_fingerprint(config, plan, 3, nullptr, 2);
  EXPECT_EQ(f["classes"], 3);
  EXPECT_EQ(f["world_size"], 2);
  EXPECT_EQ(f["batch_size"], 16);
  EXPECT_EQ(f["seed"], 11);
  EXPECT_EQ(f["optimizer_steps"], 40);
  EXPECT_EQ(f["peak_lr"], 0.05);
  EXPECT_EQ(f["train_images"], 0);  // synthetic: no split
  EXPECT_FALSE(f.contains("train_split"));
  // Any change of a setting it holds is a mismatch.
  config.loader.seed = 12;
  EXPECT_NE(fingerprint_mismatch(run_fingerprint(config, plan, 3, nullptr, 2), f), "");
}

TEST(CheckpointStateTest, TheEpochsRecordsComeBackMarkedResumed) {
  Tiny model;
  ForeachSgd sgd(trainable(model), 0.1, 0.9, 0);
  std::vector<EpochRecord> epochs(2);
  epochs[0].epoch = 0;
  epochs[1].epoch = 1;
  epochs[1].eval = EvalRecord{};
  epochs[1].eval->top1 = 0.25;
  const std::vector<EpochRecord> back =
      resumed_epochs(make_checkpoint({}, 2, epochs, 1, model, sgd.state()));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_TRUE(back[0].resumed && back[1].resumed);
  EXPECT_EQ(back[1].epoch, 1);
  ASSERT_TRUE(back[1].eval.has_value());
  EXPECT_DOUBLE_EQ(back[1].eval->top1, 0.25);
  EXPECT_TRUE(resumed_epochs(Checkpoint{}).empty());
}

}  // namespace
}  // namespace workload
