// ResNet-50 v1.5 as torchvision builds it, in LibTorch's module-holder style.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lib/model/conv_bn_ops.h"
#include "lib/model/fused_bottleneck.h"
#include "lib/model/norm_activation.h"
#include "lib/model/weight_cast.h"

namespace workload {

/// torchvision's Bottleneck (expansion 4) with the stride on the 3x3 convolution (v1.5).
class BottleneckImpl : public torch::nn::Module {
 public:
  static constexpr std::int64_t kExpansion = 4;
  BottleneckImpl(std::int64_t in_planes, std::int64_t planes, std::int64_t stride);
  torch::Tensor forward(const torch::Tensor& x);
  /// forward(x) with the convolutions' weights taken from `weights` (their cast copies, where
  /// the model made them); a fused forward's backward meets its neighbours' as `links` says.
  torch::Tensor forward_with(const torch::Tensor& x, const ForwardWeights& weights,
                             ReluLinks links = {});
  /// Whether the training forward runs fused_bottleneck(): ops set, training, fusable().
  bool fuses();
  /// The block's convolution weights, in the order forward uses them.
  std::vector<torch::Tensor> conv_weights() const;
  /// How the block's BatchNorms and what follows them run (module_norm_activation() until set).
  /// \throws c10::Error for nullptr.
  void set_norm_activation(std::shared_ptr<const NormActivation> norm);
  /// Training forwards through fused_bottleneck() on `ops` (not owned; null: the modules, the
  /// default). Eval mode, and a block fusable() refuses, run the modules.
  void set_conv_bn_ops(const ConvBnOps* ops) { conv_bn_ = ops; }
  /// The block's modules as fused_bottleneck() takes them (the shortcut's null without one;
  /// named apart from Module::modules(), which it would hide).
  BottleneckModules fusion_modules();

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  torch::nn::Sequential downsample_{nullptr};  // 1x1 conv + BN when shape changes
  // downsample_'s two modules (registered there, as downsample.0 and downsample.1).
  torch::nn::Conv2d downsample_conv_{nullptr};
  torch::nn::BatchNorm2d downsample_bn_{nullptr};
  std::shared_ptr<const NormActivation> norm_ = module_norm_activation();
  const ConvBnOps* conv_bn_ = nullptr;
};
TORCH_MODULE(Bottleneck);

/// Hook called around named parts of the forward pass ("stem", "layer1", "layer1.0", ...,
/// "fc"): `enter` true before the part, false after. Used for per-block NVTX ranges.
using ForwardHook = std::function<void(const char* name, bool enter)>;

/// torchvision's `resnet50(weights=None, num_classes=K)`: bottleneck blocks [3, 4, 6, 3],
/// BatchNorm, kaiming-normal (fan_out, relu) convolution weights, BN weight 1 / bias 0, a linear
/// head to K classes. Submodule names match torchvision's state_dict keys (conv1, layer1.0.conv1,
/// layer1.0.downsample.0, fc, ...). 23,714,981 parameters for K = 101.
class ResNet50Impl : public torch::nn::Module {
 public:
  explicit ResNet50Impl(std::int64_t num_classes);
  /// The logits. In training mode with fused_norm_activation() the BatchNorms' num_batches_tracked
  /// are advanced together at the end, in one kernel (DeferredBatchCounts). Under autocast with
  /// set_cast_weights_together(true), every weight autocast would cast (the convolutions' and the
  /// head's weight and bias) is cast at the start, together (cast_together): one kernel each way
  /// instead of one per weight, the same values.
  torch::Tensor forward(const torch::Tensor& x);
  /// Same computation with `hook` called around the stem, each stage, each block and the head.
  torch::Tensor forward_with_hook(const torch::Tensor& x, const ForwardHook& hook);
  std::int64_t num_classes() const { return num_classes_; }
  /// How every BatchNorm and what follows it run: module_norm_activation() (the default, LibTorch's
  /// modules) or fused_norm_activation() (--fused-bn). The module tree, the parameters and the
  /// buffers are the same either way.
  void set_norm_activation(const std::shared_ptr<const NormActivation>& norm);
  /// Every bottleneck's training forward through fused_bottleneck() on `ops` (null: the modules).
  /// The stem and the head keep their modules; the parameters and buffers are the same either way.
  void set_conv_bn_ops(const ConvBnOps* ops);
  /// Whether a forward under autocast casts the weights together at its start (true) or autocast
  /// casts each where its layer uses it (false, the default: one cast kernel each way per weight,
  /// each weight's gradient ready as soon as its layer's backward is, which DDP's overlap needs).
  void set_cast_weights_together(bool together) { cast_together_ = together; }
  bool cast_weights_together() const { return cast_together_; }
  /// Whether the stem's convolution takes a 3-channel input padded to 4 (true: a zero channel,
  /// made in the convolution's dtype, and a zero slice of its weight, as the MLPerf record's stem;
  /// the same sums) or as it comes (false, the default, where cuDNN pads it inside).
  void set_stem_pad(bool pad) { stem_pad_ = pad; }
  /// The weights autocast casts to its lower precision: every convolution's, in the order forward
  /// uses them, then the head's weight and bias. The parameters themselves (not copies).
  const std::vector<torch::Tensor>& low_precision_weights() const { return cast_weights_; }

 private:
  torch::nn::Sequential make_layer(std::int64_t planes, std::int64_t blocks, std::int64_t stride);
  /// The weights this forward of `x` uses: cast together now, or the modules' own.
  ForwardWeights forward_weights(const torch::Tensor& x) const;
  /// forward(x), calling `hook` (when not null) around the stem, each stage, block and the head.
  torch::Tensor forward_impl(const torch::Tensor& x, const ForwardHook* hook);
  /// The stem's convolution of x, padded to 4 channels where set_stem_pad() says so.
  torch::Tensor stem_conv(const torch::Tensor& x, const ForwardWeights& weights) const;
  std::int64_t num_classes_;
  std::int64_t in_planes_ = 64;
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr};
  torch::nn::MaxPool2d maxpool_{nullptr};
  torch::nn::Sequential layer1_{nullptr}, layer2_{nullptr}, layer3_{nullptr}, layer4_{nullptr};
  torch::nn::AdaptiveAvgPool2d avgpool_{nullptr};
  torch::nn::Linear fc_{nullptr};
  std::shared_ptr<const NormActivation> norm_ = module_norm_activation();
  std::vector<torch::Tensor> cast_weights_;  // low_precision_weights()
  bool cast_together_ = false;
  bool stem_pad_ = false;
};
TORCH_MODULE(ResNet50);

/// Total number of elements of all parameters.
std::int64_t count_parameters(const torch::nn::Module& module);

/// Converts every 4-D parameter and buffer to channels_last memory, once, in place.
void to_channels_last(torch::nn::Module& module);

}  // namespace workload
