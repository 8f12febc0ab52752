// ResNet-50 v1.5 as torchvision builds it, in LibTorch's module-holder style.
#include "lib/model/resnet50.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/conv.h>
#include <torch/nn/init.h>
#include <torch/types.h>

#include <optional>
#include <utility>

#include "lib/device/autocast_guard.h"
#include "lib/model/max_pool.h"

namespace workload {

namespace {
torch::nn::Conv2d conv(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride,
                       std::int64_t padding) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, k).stride(stride).padding(padding).bias(false));
}

// What `c`'s forward computes, with `weights`' copy of its weight (Conv2dImpl applies its own
// weight only). The model's convolutions pad with zeros, which is all this passes on.
torch::Tensor conv_with(const torch::nn::Conv2dImpl& c, const torch::Tensor& x,
                        const ForwardWeights& weights) {
  namespace F = torch::nn::functional;
  const auto& o = c.options;
  return F::conv2d(x, weights[c.weight],
                   F::Conv2dFuncOptions()
                       .bias(c.bias)
                       .stride(o.stride())
                       .padding(o.padding())
                       .dilation(o.dilation())
                       .groups(o.groups()));
}
}  // namespace

BottleneckImpl::BottleneckImpl(std::int64_t in_planes, std::int64_t planes, std::int64_t stride) {
  conv1_ = register_module("conv1", conv(in_planes, planes, 1, 1, 0));
  bn1_ = register_module("bn1", torch::nn::BatchNorm2d(planes));
  conv2_ = register_module("conv2", conv(planes, planes, 3, stride, 1));
  bn2_ = register_module("bn2", torch::nn::BatchNorm2d(planes));
  conv3_ = register_module("conv3", conv(planes, planes * kExpansion, 1, 1, 0));
  bn3_ = register_module("bn3", torch::nn::BatchNorm2d(planes * kExpansion));
  if (stride != 1 || in_planes != planes * kExpansion) {
    downsample_conv_ = conv(in_planes, planes * kExpansion, 1, stride, 0);
    downsample_bn_ = torch::nn::BatchNorm2d(planes * kExpansion);
    downsample_ =
        register_module("downsample", torch::nn::Sequential(downsample_conv_, downsample_bn_));
  }
}

void BottleneckImpl::set_norm_activation(std::shared_ptr<const NormActivation> norm) {
  TORCH_CHECK(norm != nullptr, "Bottleneck: expected a NormActivation, got nullptr");
  norm_ = std::move(norm);
}

BottleneckModules BottleneckImpl::fusion_modules() {
  const bool shortcut = !downsample_conv_.is_empty();
  return {conv1_.get(),
          conv2_.get(),
          conv3_.get(),
          bn1_.get(),
          bn2_.get(),
          bn3_.get(),
          shortcut ? downsample_conv_.get() : nullptr,
          shortcut ? downsample_bn_.get() : nullptr};
}

torch::Tensor BottleneckImpl::forward(const torch::Tensor& x) { return forward_with(x, {}); }

bool BottleneckImpl::fuses() {
  return conv_bn_ != nullptr && is_training() && fusable(fusion_modules());
}

torch::Tensor BottleneckImpl::forward_with(const torch::Tensor& x, const ForwardWeights& w,
                                           ReluLinks links) {
  if (fuses()) return fused_bottleneck(*conv_bn_, fusion_modules(), x, w, links);
  torch::Tensor out = norm_->bn_relu(*bn1_, conv_with(*conv1_, x, w));
  out = norm_->bn_relu(*bn2_, conv_with(*conv2_, out, w));
  return norm_->bn_add_relu(*bn3_, conv_with(*conv3_, out, w), [&] {
    return downsample_ ? norm_->bn(*downsample_bn_, conv_with(*downsample_conv_, x, w)) : x;
  });
}

std::vector<torch::Tensor> BottleneckImpl::conv_weights() const {
  std::vector<torch::Tensor> out = {conv1_->weight, conv2_->weight, conv3_->weight};
  if (downsample_conv_) out.push_back(downsample_conv_->weight);
  return out;
}

ResNet50Impl::ResNet50Impl(std::int64_t num_classes) : num_classes_(num_classes) {
  TORCH_CHECK(num_classes >= 1, "ResNet50: expected num_classes >= 1, got ", num_classes);
  conv1_ = register_module("conv1", conv(3, 64, 7, 2, 3));
  bn1_ = register_module("bn1", torch::nn::BatchNorm2d(64));
  maxpool_ = register_module(
      "maxpool", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2).padding(1)));
  layer1_ = register_module("layer1", make_layer(64, 3, 1));
  layer2_ = register_module("layer2", make_layer(128, 4, 2));
  layer3_ = register_module("layer3", make_layer(256, 6, 2));
  layer4_ = register_module("layer4", make_layer(512, 3, 2));
  avgpool_ = register_module("avgpool", torch::nn::AdaptiveAvgPool2d(1));
  fc_ = register_module("fc", torch::nn::Linear(512 * BottleneckImpl::kExpansion, num_classes));

  // torchvision's initialisation; Linear keeps LibTorch's default, which is PyTorch's.
  torch::NoGradGuard no_grad;
  for (auto& m : modules(/*include_self=*/false)) {
    if (auto* c = m->as<torch::nn::Conv2d>()) {
      torch::nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
    } else if (auto* b = m->as<torch::nn::BatchNorm2d>()) {
      torch::nn::init::ones_(b->weight);
      torch::nn::init::zeros_(b->bias);
    }
  }
  // The parameters' handles: to(), to_channels_last() and loading a state keep them.
  cast_weights_.push_back(conv1_->weight);
  for (auto* layer : {&layer1_, &layer2_, &layer3_, &layer4_}) {
    for (auto& block : **layer) {
      for (torch::Tensor& w : block.get<BottleneckImpl>().conv_weights())
        cast_weights_.push_back(w);
    }
  }
  cast_weights_.push_back(fc_->weight);
  cast_weights_.push_back(fc_->bias);
}

torch::nn::Sequential ResNet50Impl::make_layer(std::int64_t planes, std::int64_t blocks,
                                               std::int64_t stride) {
  torch::nn::Sequential layer;
  layer->push_back(Bottleneck(in_planes_, planes, stride));
  in_planes_ = planes * BottleneckImpl::kExpansion;
  for (std::int64_t i = 1; i < blocks; ++i) layer->push_back(Bottleneck(in_planes_, planes, 1));
  return layer;
}

void ResNet50Impl::set_norm_activation(const std::shared_ptr<const NormActivation>& norm) {
  TORCH_CHECK(norm != nullptr, "ResNet50: expected a NormActivation, got nullptr");
  norm_ = norm;
  for (auto* layer : {&layer1_, &layer2_, &layer3_, &layer4_}) {
    for (auto& block : **layer) block.get<BottleneckImpl>().set_norm_activation(norm);
  }
}

void ResNet50Impl::set_conv_bn_ops(const ConvBnOps* ops) {
  for (auto* layer : {&layer1_, &layer2_, &layer3_, &layer4_}) {
    for (auto& block : **layer) block.get<BottleneckImpl>().set_conv_bn_ops(ops);
  }
}

ForwardWeights ResNet50Impl::forward_weights(const torch::Tensor& x) const {
  if (!cast_together_) return {};
  const std::optional<at::ScalarType> dtype = autocast_dtype(x.device().type());
  // Autocast casts a layer's floating weights to its lower precision where the layer runs in it
  // (convolutions and linear layers); off, or already there, nothing is cast.
  if (!dtype || cast_weights_.front().scalar_type() == *dtype) return {};
  return ForwardWeights(cast_weights_, *dtype);
}

torch::Tensor ResNet50Impl::stem_conv(const torch::Tensor& x, const ForwardWeights& weights) const {
  if (!stem_pad_ || x.dim() != 4 || x.size(1) != 3) return conv_with(*conv1_, x, weights);
  // The input in the dtype the convolution runs in (autocast's, where it is on), so that padding
  // and casting are one copy; the weight's zero slice takes no gradient of its own.
  const at::ScalarType dtype = autocast_dtype(x.device().type()).value_or(x.scalar_type());
  const at::MemoryFormat format = x.suggest_memory_format();  // the model's layout
  torch::Tensor padded = at::zeros({x.size(0), 4, x.size(2), x.size(3)},
                                   x.options().dtype(dtype).memory_format(format));
  padded.narrow(1, 0, 3).copy_(x);
  const torch::Tensor& w = weights[conv1_->weight];
  const torch::Tensor w4 =
      torch::cat({w, at::zeros({w.size(0), 1, w.size(2), w.size(3)}, w.options())}, 1)
          .contiguous(format);
  namespace F = torch::nn::functional;
  const auto& o = conv1_->options;
  return F::conv2d(padded, w4, F::Conv2dFuncOptions().stride(o.stride()).padding(o.padding()));
}

torch::Tensor ResNet50Impl::forward(const torch::Tensor& x) { return forward_impl(x, nullptr); }

torch::Tensor ResNet50Impl::forward_with_hook(const torch::Tensor& x, const ForwardHook& hook) {
  return forward_impl(x, &hook);
}

torch::Tensor ResNet50Impl::forward_impl(const torch::Tensor& x, const ForwardHook* hook) {
  const auto mark = [hook](const char* name, bool enter) {
    if (hook) (*hook)(name, enter);
  };
  DeferredBatchCounts counts;
  const ForwardWeights w = forward_weights(x);
  mark("stem", true);
  torch::Tensor y = max_pool2d(norm_->bn_relu(*bn1_, stem_conv(x, w)), maxpool_->options);
  mark("stem", false);
  static const char* const kBlockNames[4][6] = {
      {"layer1.0", "layer1.1", "layer1.2"},
      {"layer2.0", "layer2.1", "layer2.2", "layer2.3"},
      {"layer3.0", "layer3.1", "layer3.2", "layer3.3", "layer3.4", "layer3.5"},
      {"layer4.0", "layer4.1", "layer4.2"}};
  static const char* const kLayerNames[4] = {"layer1", "layer2", "layer3", "layer4"};
  torch::nn::Sequential* layers[4] = {&layer1_, &layer2_, &layer3_, &layer4_};
  std::vector<BottleneckImpl*> blocks;
  for (auto* layer : layers) {
    for (auto& block : **layer) blocks.push_back(&block.get<BottleneckImpl>());
  }
  // Between two fused blocks, the ReLU's backward is applied once, by the later one. The first
  // block's input is the max pool's output, whose gradient the stem's ReLU takes.
  std::size_t i = 0;
  const auto links = [&](std::size_t k) {
    const bool next_fused = k + 1 < blocks.size() && blocks[k + 1]->fuses();
    return ReluLinks{/*input_relu=*/k > 0, /*output_grad_through_relu=*/next_fused};
  };
  for (int l = 0; l < 4; ++l) {
    mark(kLayerNames[l], true);
    for (std::size_t b = 0; b < layers[l]->get()->size(); ++b, ++i) {
      mark(kBlockNames[l][b], true);
      y = blocks[i]->forward_with(y, w, links(i));
      mark(kBlockNames[l][b], false);
    }
    mark(kLayerNames[l], false);
  }
  mark("fc", true);
  y = torch::linear(torch::flatten(avgpool_(y), 1), w[fc_->weight], w[fc_->bias]);
  mark("fc", false);
  counts.flush();
  return y;
}

std::int64_t count_parameters(const torch::nn::Module& module) {
  std::int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

void to_channels_last(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters()) {
    if (p.dim() == 4) p.set_data(p.data().contiguous(torch::MemoryFormat::ChannelsLast));
  }
  for (auto& b : module.buffers()) {
    if (b.dim() == 4) b.set_data(b.data().contiguous(torch::MemoryFormat::ChannelsLast));
  }
}

}  // namespace workload
