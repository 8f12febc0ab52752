// The model's normalisation parts (lib/model/norm_activation.h): the one file of lib/ that compiles
// against lib/model/cudnn_bn when this build has it.
#include "lib/model/norm_activation.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "lib/core/build_features.h"

#if defined(WORKLOAD_HAVE_FUSED_BN)
#include "lib/model/cudnn_bn/fused_batch_norm.h"
#endif

namespace workload {

namespace {
thread_local DeferredBatchCounts* t_counts = nullptr;
}  // namespace

DeferredBatchCounts::DeferredBatchCounts() : outer_(t_counts) { t_counts = this; }

DeferredBatchCounts::~DeferredBatchCounts() {
  t_counts = outer_;
  try {
    flush();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: BatchNorm's num_batches_tracked not counted: %s\n", e.what());
  }
}

void DeferredBatchCounts::flush() {
  if (pending_.empty()) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> counters;
  counters.swap(pending_);
  at::_foreach_add_(counters, 1);
}

DeferredBatchCounts* DeferredBatchCounts::current() { return t_counts; }

void DeferredBatchCounts::count(torch::Tensor& counter) {
  if (t_counts != nullptr) {
    std::vector<torch::Tensor>& pending = t_counts->pending_;
    // A counter once in the list: a multi-tensor add must not write one tensor twice.
    const bool listed = std::any_of(pending.begin(), pending.end(),
                                    [&](const torch::Tensor& t) { return t.is_same(counter); });
    if (!listed) {
      pending.push_back(counter);
      return;
    }
  }
  torch::NoGradGuard no_grad;
  counter += 1;
}

namespace {

class ModuleNormActivation final : public NormActivation {
 public:
  torch::Tensor bn_relu(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x) const override {
    return torch::relu(bn.forward(x));
  }
  torch::Tensor bn_add_relu(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x,
                            c10::function_ref<torch::Tensor()> residual) const override {
    torch::Tensor out = bn.forward(x);
    out += residual();
    return torch::relu(out);
  }
  torch::Tensor bn(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x) const override {
    return bn.forward(x);
  }
};

}  // namespace

std::shared_ptr<const NormActivation> module_norm_activation() {
  static const auto instance = std::make_shared<const ModuleNormActivation>();
  return instance;
}

#if defined(WORKLOAD_HAVE_FUSED_BN)
namespace {

class FusedNormActivation final : public NormActivation {
 public:
  // What cuDNN does not take runs as the modules do.
  torch::Tensor bn_relu(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x) const override {
    if (!cudnn_bn::fusable(bn, x, cudnn_bn::BnOps::kBnRelu)) return modules_->bn_relu(bn, x);
    return fused(bn, x, {}, cudnn_bn::BnOps::kBnRelu);
  }
  torch::Tensor bn_add_relu(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x,
                            c10::function_ref<torch::Tensor()> residual) const override {
    if (!cudnn_bn::fusable(bn, x, cudnn_bn::BnOps::kBnAddRelu)) {
      return modules_->bn_add_relu(bn, x, residual);
    }
    return fused(bn, x, residual(), cudnn_bn::BnOps::kBnAddRelu);
  }
  torch::Tensor bn(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x) const override {
    if (!cudnn_bn::fusable(bn, x, cudnn_bn::BnOps::kBn)) return modules_->bn(bn, x);
    return fused(bn, x, {}, cudnn_bn::BnOps::kBn);
  }

 private:
  static torch::Tensor fused(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x,
                             const torch::Tensor& z, cudnn_bn::BnOps ops) {
    // +1 as BatchNormImplBase::forward in training mode, in one kernel a forward when the model
    // collects the counts (DeferredBatchCounts).
    DeferredBatchCounts::count(bn.num_batches_tracked);
    return cudnn_bn::fused_batch_norm(bn, x, z, ops);
  }

  const std::shared_ptr<const NormActivation> modules_ = module_norm_activation();
};

}  // namespace
#endif

std::shared_ptr<const NormActivation> fused_norm_activation() {
  require_built(Feature::kFusedBn, "--fused-bn", "fused batch norm");
#if defined(WORKLOAD_HAVE_FUSED_BN)
  static const auto instance = std::make_shared<const FusedNormActivation>();
  return instance;
#else
  return nullptr;
#endif
}

}  // namespace workload
