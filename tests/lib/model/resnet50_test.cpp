// Tests for ResNet50: torchvision's architecture (parameter count, names, init), channels_last,
// the hooked forward, that one SGD step lowers the loss on a fixed batch, and the weights cast
// together under autocast (the same loss and gradients as autocast's own casts, in one node), and
// the stem's pool (the model's own where its kernels take the tensor).
#include "lib/model/resnet50.h"

#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "lib/core/build_features.h"
#include "lib/device/autocast_guard.h"
#include "lib/device/cuda_device.h"
#include "lib/model/max_pool.h"

namespace workload {
namespace {

TEST(ResNet50Test, ParameterCountMatchesTorchvision) {
  EXPECT_EQ(count_parameters(*ResNet50(101)), 23714981);
  EXPECT_EQ(count_parameters(*ResNet50(1000)), 25557032);  // torchvision's resnet50()
}

TEST(ResNet50Test, NamesMatchTorchvisionStateDictKeys) {
  ResNet50 m(101);
  const auto params = m->named_parameters();
  for (const char* key :
       {"conv1.weight", "bn1.weight", "layer1.0.conv1.weight", "layer1.0.downsample.0.weight",
        "layer1.0.downsample.1.bias", "layer2.3.conv3.weight", "layer3.5.bn2.weight",
        "layer4.2.conv2.weight", "fc.weight", "fc.bias"}) {
    EXPECT_TRUE(params.contains(key)) << key;
  }
  EXPECT_FALSE(params.contains("layer1.1.downsample.0.weight"));
  EXPECT_EQ(params.size(), 161u);  // torchvision's resnet50 has 161 parameter tensors
  EXPECT_TRUE(m->named_buffers().contains("layer4.2.bn3.running_var"));
  // v1.5: the stride sits on the 3x3 convolution of each stage's first block.
  EXPECT_EQ(params["layer2.0.conv2.weight"].sizes(), (std::vector<std::int64_t>{128, 128, 3, 3}));
}

TEST(ResNet50Test, InitialisationFollowsTorchvision) {
  torch::manual_seed(0);
  ResNet50 m(101);
  const auto params = m->named_parameters();
  // kaiming_normal_(mode=fan_out, relu): std = sqrt(2 / (out_channels * kh * kw)).
  const auto w = params["layer3.0.conv2.weight"];  // 256 x 256 x 3 x 3
  EXPECT_NEAR(w.std().item<double>(), std::sqrt(2.0 / (256 * 9)), 0.002);
  EXPECT_NEAR(w.mean().item<double>(), 0.0, 0.002);
  EXPECT_TRUE(torch::all(params["layer1.0.bn1.weight"] == 1).item<bool>());
  EXPECT_TRUE(torch::all(params["layer1.0.bn1.bias"] == 0).item<bool>());
  // Linear keeps PyTorch's default: uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias.
  EXPECT_LE(params["fc.bias"].abs().max().item<double>(), 1.0 / std::sqrt(2048.0) + 1e-7);
}

TEST(ResNet50Test, OutputShapeAndChannelsLast) {
  ResNet50 m(7);
  to_channels_last(*m);
  for (const auto& p : m->parameters()) {
    if (p.dim() == 4) {
      EXPECT_TRUE(p.is_contiguous(torch::MemoryFormat::ChannelsLast));
    }
  }
  const auto x = torch::randn({2, 3, 64, 64}).contiguous(torch::MemoryFormat::ChannelsLast);
  const auto y = m->forward(x);
  EXPECT_EQ(y.sizes(), (std::vector<std::int64_t>{2, 7}));
}

TEST(ResNet50Test, HookedForwardIsTheSameComputationInOrder) {
  torch::manual_seed(3);
  ResNet50 m(5);
  m->eval();
  const auto x = torch::randn({1, 3, 64, 64});
  std::vector<std::string> events;
  const auto y1 = m->forward_with_hook(x, [&](const char* name, bool enter) {
    events.push_back(std::string(enter ? "+" : "-") + name);
  });
  EXPECT_TRUE(torch::allclose(y1, m->forward(x)));
  ASSERT_EQ(events.size(), 2u * (1 + 4 + 16 + 1));
  EXPECT_EQ(events.front(), "+stem");
  EXPECT_EQ(events[2], "+layer1");
  EXPECT_EQ(events[3], "+layer1.0");
  EXPECT_EQ(events[4], "-layer1.0");
  EXPECT_EQ(events[events.size() - 3], "-layer4");
  EXPECT_EQ(events.back(), "-fc");
}

TEST(ResNet50Test, InitialLossIsNearLogKAndOneStepLowersIt) {
  torch::manual_seed(1);
  ResNet50 m(10);
  to_channels_last(*m);
  m->train();
  const auto x = torch::randn({8, 3, 32, 32}).contiguous(torch::MemoryFormat::ChannelsLast);
  const auto y = torch::randint(10, {8}, torch::kInt64);
  // A small plain gradient step: first-order decrease, whatever the random batch's curvature.
  torch::optim::SGD opt(m->parameters(), torch::optim::SGDOptions(1e-3));
  const auto loss0 = torch::nn::functional::cross_entropy(m->forward(x), y);
  EXPECT_LT(std::fabs(loss0.item<double>() - std::log(10.0)), 2.0);
  opt.zero_grad();
  loss0.backward();
  opt.step();
  const auto loss1 = torch::nn::functional::cross_entropy(m->forward(x), y);
  EXPECT_LT(loss1.item<double>(), loss0.item<double>());
}

// How many nodes of each name the autograd graph behind `root` holds (each node once).
std::map<std::string, int> graph_nodes(const torch::Tensor& root) {
  std::map<std::string, int> count;
  std::set<const torch::autograd::Node*> seen;
  std::deque<std::shared_ptr<torch::autograd::Node>> todo = {root.grad_fn()};
  while (!todo.empty()) {
    const std::shared_ptr<torch::autograd::Node> node = todo.front();
    todo.pop_front();
    if (!node || !seen.insert(node.get()).second) continue;
    std::string name = node->name();
    if (name.find("CastTogether") != std::string::npos) name = "CastTogether";
    ++count[name];
    for (const auto& edge : node->next_edges()) todo.push_back(edge.function);
  }
  return count;
}

/// One forward and backward of a small ResNet-50 under bf16 autocast on `device` (or without it),
/// its weights cast together or by autocast: the loss, every gradient, the graph's nodes.
struct CastRun {
  float loss = 0;
  std::vector<torch::Tensor> grads;
  std::map<std::string, int> nodes;
};

class CastFixture {
 public:
  CastFixture(torch::Device device, bool fused) : model_(nullptr), device_(device) {
    torch::manual_seed(3);
    model_ = ResNet50(5);
    model_->to(device);
    to_channels_last(*model_);
    if (fused) model_->set_norm_activation(fused_norm_activation());
    model_->train();
    torch::manual_seed(4);
    const auto on = torch::TensorOptions().device(device);
    x_ = torch::randn({2, 3, 32, 32}, on).contiguous(torch::MemoryFormat::ChannelsLast);
    y_ = torch::randint(5, {2}, on.dtype(torch::kInt64));
  }
  CastRun run(bool together, bool autocast) {
    model_->set_cast_weights_together(together);
    model_->zero_grad();
    CastRun r;
    torch::Tensor loss;
    {
      AutocastGuard guard(autocast, device_.type());
      loss = torch::nn::functional::cross_entropy(model_->forward(x_), y_);
    }
    r.nodes = graph_nodes(loss);
    loss.backward();
    r.loss = loss.item<float>();
    for (const auto& p : model_->parameters()) r.grads.push_back(p.grad().clone());
    return r;
  }
  const ResNet50& model() const { return model_; }

 private:
  ResNet50 model_;
  torch::Device device_;
  torch::Tensor x_, y_;
};

void expect_same_step(const CastRun& together, const CastRun& per_layer) {
  EXPECT_EQ(together.loss, per_layer.loss);
  ASSERT_EQ(together.grads.size(), per_layer.grads.size());
  for (std::size_t i = 0; i < together.grads.size(); ++i) {
    EXPECT_EQ(together.grads[i].scalar_type(), torch::kFloat) << "parameter " << i;
    EXPECT_TRUE(torch::equal(together.grads[i], per_layer.grads[i])) << "parameter " << i;
    EXPECT_EQ(together.grads[i].strides(), per_layer.grads[i].strides()) << "parameter " << i;
  }
}

int nodes_named(const CastRun& r, const std::string& name) {
  const auto it = r.nodes.find(name);
  return it == r.nodes.end() ? 0 : it->second;
}

TEST(ResNet50Test, TheWeightsAutocastCastsAreTheConvolutionsAndTheHead) {
  ResNet50 m(5);
  const auto& w = m->low_precision_weights();
  ASSERT_EQ(w.size(), 53u + 2u);  // 49 convolutions in the blocks, 4 projections, the stem; fc
  const auto params = m->named_parameters();
  EXPECT_TRUE(w.front().is_same(params["conv1.weight"]));
  EXPECT_TRUE(w[1].is_same(params["layer1.0.conv1.weight"]));
  EXPECT_TRUE(w[4].is_same(params["layer1.0.downsample.0.weight"]));
  EXPECT_TRUE(w[w.size() - 2].is_same(params["fc.weight"]));
  EXPECT_TRUE(w.back().is_same(params["fc.bias"]));
  EXPECT_FALSE(m->cast_weights_together());  // autocast's own casts unless asked
}

// Under autocast the weights cast together make one node where autocast made one cast per weight,
// and the step is the same to the bit (CPU autocast here; the CUDA case below).
TEST(ResNet50Test, WeightsCastTogetherGiveAutocastsLossAndGradientsInOneNode) {
  CastFixture f(torch::kCPU, /*fused=*/false);
  const CastRun per_layer = f.run(/*together=*/false, /*autocast=*/true);
  const CastRun together = f.run(/*together=*/true, /*autocast=*/true);
  expect_same_step(together, per_layer);
  const int weights = static_cast<int>(f.model()->low_precision_weights().size());
  EXPECT_EQ(nodes_named(per_layer, "CastTogether"), 0);
  EXPECT_EQ(nodes_named(together, "CastTogether"), 1);
  EXPECT_EQ(nodes_named(per_layer, "ToCopyBackward0") - nodes_named(together, "ToCopyBackward0"),
            weights);
}

TEST(ResNet50Test, WithoutAutocastNothingIsCast) {
  CastFixture f(torch::kCPU, /*fused=*/false);
  const CastRun plain = f.run(/*together=*/false, /*autocast=*/false);
  const CastRun asked = f.run(/*together=*/true, /*autocast=*/false);
  expect_same_step(asked, plain);
  EXPECT_EQ(nodes_named(asked, "CastTogether"), 0);
  EXPECT_EQ(nodes_named(asked, "ToCopyBackward0"), 0);
}

// The stem's input padded to 4 channels adds zeros to the first convolution's sums: in double, the
// loss and every gradient are the unpadded model's to rounding, the parameters keep their shapes,
// and the padded weight is a node of the graph (the padding ran).
TEST(ResNet50Test, TheStemPaddedTo4ChannelsComputesTheSameStep) {
  torch::manual_seed(31);
  ResNet50 m(5);
  m->to(torch::kDouble);
  to_channels_last(*m);
  const torch::Tensor x =
      torch::randn({4, 3, 64, 64}, torch::kDouble).contiguous(torch::MemoryFormat::ChannelsLast);
  const torch::Tensor y = torch::tensor({1, 4, 0, 2});
  const auto step = [&](bool pad, std::map<std::string, int>* nodes) {
    m->set_stem_pad(pad);
    m->zero_grad();
    const torch::Tensor loss = torch::nn::functional::cross_entropy(m->forward(x), y);
    *nodes = graph_nodes(loss);
    loss.backward();
    std::vector<torch::Tensor> out = {loss.detach().clone()};
    for (const auto& p : m->parameters()) out.push_back(p.grad().clone());
    return out;
  };
  std::map<std::string, int> plain_nodes, padded_nodes;
  const std::vector<torch::Tensor> plain = step(false, &plain_nodes);
  const std::vector<torch::Tensor> padded = step(true, &padded_nodes);
  EXPECT_EQ(plain_nodes.count("CatBackward0"), 0u);
  EXPECT_EQ(padded_nodes.count("CatBackward0"), 1u);
  ASSERT_EQ(plain.size(), padded.size());
  double worst_all = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(plain[i].sizes(), padded[i].sizes()) << "tensor " << i;
    const double scale = std::max(plain[i].abs().max().item<double>(), 1e-300);
    const double worst = (padded[i] - plain[i]).abs().max().item<double>() / scale;
    worst_all = std::max(worst_all, worst);
    EXPECT_LT(worst, 1e-9) << "tensor " << i;
  }
  std::printf("[ stem pad ] worst difference %.3g of a tensor's largest value\n", worst_all);
  EXPECT_EQ(m->named_parameters()["conv1.weight"].sizes(),
            (std::vector<std::int64_t>{64, 3, 7, 7}));
  // An NCHW model pads in NCHW, to the same logits.
  ResNet50 nchw(5);
  nchw->to(torch::kDouble);
  nchw->eval();
  const torch::NoGradGuard no_grad;
  const torch::Tensor plain_logits = nchw->forward(x.contiguous());
  nchw->set_stem_pad(true);
  const torch::Tensor padded_logits = nchw->forward(x.contiguous());
  EXPECT_TRUE(torch::allclose(padded_logits, plain_logits, 1e-9, 1e-12));
}

// The stem pools through max_pool2d() (lib/model/max_pool.h): one node of its own where this
// build's kernels take the stem's tensor (a CUDA channels-last one), LibTorch's pool otherwise (the
// CPU). Either way the model's autograd graph holds exactly one max pool.
TEST(ResNet50Test, TheStemPoolsWithTheModelsOwnMaxPoolWhereItsKernelsTakeTheTensor) {
  std::vector<torch::Device> devices = {torch::kCPU};
  if (cuda_available()) devices.emplace_back(torch::kCUDA);
  for (const torch::Device& device : devices) {
    SCOPED_TRACE(device.str());
    torch::manual_seed(37);
    ResNet50 m(5);
    m->to(device);
    to_channels_last(*m);
    const torch::Tensor x = torch::randn({2, 3, 64, 64}, torch::TensorOptions().device(device))
                                .contiguous(torch::MemoryFormat::ChannelsLast);
    const torch::Tensor loss = torch::nn::functional::cross_entropy(
        m->forward(x), torch::tensor({1, 4}, torch::TensorOptions().device(device)));
    const std::map<std::string, int> nodes = graph_nodes(loss);
    int own = 0;
    for (const auto& [name, n] : nodes)
      if (name.find("MaxPoolFunction") != std::string::npos) own += n;
    const int libtorch = nodes.count("MaxPool2DWithIndicesBackward0") != 0
                             ? nodes.at("MaxPool2DWithIndicesBackward0")
                             : 0;
    // The stem's pool input: 64 channels at half the image's size, in the model's layout.
    const torch::Tensor stem_like =
        torch::empty({2, 64, 32, 32}, x.options()).contiguous(torch::MemoryFormat::ChannelsLast);
    const torch::nn::MaxPool2dOptions stem_pool =
        torch::nn::MaxPool2dOptions(3).stride(2).padding(1);
    if (max_pool_kernels_take(stem_like, stem_pool)) {
      EXPECT_EQ(own, 1);
      EXPECT_EQ(libtorch, 0);
    } else {
      EXPECT_EQ(own, 0);
      EXPECT_EQ(libtorch, 1);
    }
    if (!device.is_cuda()) {
      EXPECT_FALSE(max_pool_kernels_take(stem_like, stem_pool));
    }
  }
}

// The run's configuration: CUDA bf16 autocast, cuDNN's fused batch norm where this build has it.
// Deterministic cuDNN so that two backward passes can be compared to the bit.
TEST(ResNet50Test, GpuWeightsCastTogetherGiveAutocastsLossAndGradientsInOneNode) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto& ctx = at::globalContext();
  const bool deterministic = ctx.deterministicCuDNN(), benchmark = ctx.benchmarkCuDNN();
  ctx.setDeterministicCuDNN(true);
  ctx.setBenchmarkCuDNN(false);
  for (const bool fused : {false, true}) {
    if (fused && !built(Feature::kFusedBn)) continue;
    SCOPED_TRACE(fused ? "fused batch norm" : "LibTorch's batch norm");
    CastFixture f(torch::kCUDA, fused);
    const CastRun per_layer = f.run(false, true);
    const CastRun together = f.run(true, true);
    expect_same_step(together, per_layer);
    EXPECT_EQ(nodes_named(together, "CastTogether"), 1);
    EXPECT_EQ(nodes_named(per_layer, "ToCopyBackward0") - nodes_named(together, "ToCopyBackward0"),
              static_cast<int>(f.model()->low_precision_weights().size()));
  }
  ctx.setDeterministicCuDNN(deterministic);
  ctx.setBenchmarkCuDNN(benchmark);
}

// Every bottleneck through fused_bottleneck() on the reference pieces: a training step's logits
// and gradients as the modules'. A freshly initialised ResNet-50 is so sensitive that its own
// modules in NCHW and in NHWC (other kernels, other rounding) already differ: logits by about 1e-4,
// each gradient by 2-4% (median). The fused blocks must differ from the modules no more than that,
// measured here on the same batch; each block alone matches to 1e-4 (fused_bottleneck_test).
TEST(ResNet50Test, FusedBottlenecksComputeWhatTheModulesDo) {
  struct Run {
    torch::Tensor logits;
    std::map<std::string, torch::Tensor> grads, buffers;
  };
  const torch::Tensor x = [] {
    torch::manual_seed(22);
    return torch::randn({4, 3, 64, 64}).contiguous(torch::MemoryFormat::ChannelsLast);
  }();
  const torch::Tensor y = torch::tensor({1, 7, 3, 3}, torch::kInt64);
  const auto step = [&](bool channels_last, const ConvBnOps* ops) {
    torch::manual_seed(21);
    ResNet50 m(10);
    if (channels_last) to_channels_last(*m);
    m->set_conv_bn_ops(ops);
    m->train();
    Run r;
    const torch::Tensor in = channels_last ? x : x.contiguous();
    r.logits = m->forward(in);
    torch::nn::functional::cross_entropy(r.logits, y).backward();
    for (const auto& p : m->named_parameters()) r.grads[p.key()] = p.value().grad();
    for (const auto& b : m->named_buffers()) r.buffers[b.key()] = b.value().clone();
    m->eval();
    return r;
  };
  const auto rel = [](const torch::Tensor& a, const torch::Tensor& b) {
    return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-30);
  };
  const auto median_grad_error = [&](const Run& a, const Run& b) {
    std::vector<double> e;
    for (const auto& [k, g] : a.grads) e.push_back(rel(g, b.grads.at(k)));
    std::sort(e.begin(), e.end());
    return e[e.size() / 2];
  };
  const Run modules = step(true, nullptr);
  const Run nchw = step(false, nullptr);
  const Run fused = step(true, &reference_conv_bn_ops());
  const double floor_logits = rel(nchw.logits, modules.logits);
  const double floor_grads = median_grad_error(nchw, modules);
  // Three times the layouts' difference, plus a margin for a path where they round alike.
  EXPECT_LT(rel(fused.logits, modules.logits), 3 * floor_logits + 5e-4)
      << "the layouts differ by " << floor_logits;
  EXPECT_LT(median_grad_error(fused, modules), 3 * floor_grads + 2e-2)
      << "the layouts differ by " << floor_grads;
  for (const auto& [k, g] : fused.grads) EXPECT_TRUE(g.defined()) << k;
  for (const auto& [k, b] : fused.buffers) {
    if (k.find("num_batches_tracked") != std::string::npos) {
      EXPECT_TRUE(torch::equal(b, modules.buffers.at(k))) << k;
    } else {
      EXPECT_LT(rel(b, modules.buffers.at(k)), 1e-3) << k;
    }
  }
}

// Eval mode runs the modules whatever the pieces.
TEST(ResNet50Test, FusedBottlenecksEvaluateAsTheModules) {
  torch::manual_seed(23);
  ResNet50 a(10), b(10);
  {
    torch::NoGradGuard g;
    const auto pa = a->named_parameters();
    for (auto& p : b->named_parameters()) p.value().copy_(pa[p.key()]);
  }
  b->set_conv_bn_ops(&reference_conv_bn_ops());
  a->eval();
  b->eval();
  const torch::Tensor x = torch::randn({2, 3, 64, 64});
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(a->forward(x), b->forward(x)));
}

}  // namespace
}  // namespace workload
