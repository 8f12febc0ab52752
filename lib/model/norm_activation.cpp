// The model's normalisation parts (lib/model/norm_activation.h): the one file of lib/ that compiles
// against lib/model/cudnn_bn when this build has it.
#include "lib/model/norm_activation.h"

#include <string>

#include "lib/core/build_features.h"

#if defined(WORKLOAD_HAVE_FUSED_BN)
#include "lib/model/cudnn_bn/fused_norm_activation.h"
#endif

namespace workload {

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

std::shared_ptr<const NormActivation> fused_norm_activation() {
  require_built(Feature::kFusedBn, "--fused-bn", "fused batch norm");
#if defined(WORKLOAD_HAVE_FUSED_BN)
  return cudnn_bn::make_fused_norm_activation();
#else
  return nullptr;
#endif
}

}  // namespace workload
