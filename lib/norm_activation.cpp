// The model's normalisation parts (lib/norm_activation.h): the one file of lib/ that depends on
// whether this build has lib/cudnn_bn.
#include "lib/norm_activation.h"

#include <string>

#include "lib/usage_error.h"

#if defined(WORKLOAD_HAVE_FUSED_BN)
#include "lib/cudnn_bn/fused_norm_activation.h"
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

void check_fused_bn_built() {
#if !defined(WORKLOAD_HAVE_FUSED_BN)
  throw UsageError(std::string("--fused-bn: this build has no fused batch norm (") +
                   WORKLOAD_FUSED_BN_MISSING + ")");
#endif
}

std::shared_ptr<const NormActivation> fused_norm_activation() {
  check_fused_bn_built();
#if defined(WORKLOAD_HAVE_FUSED_BN)
  return cudnn_bn::make_fused_norm_activation();
#else
  return nullptr;
#endif
}

}  // namespace workload
