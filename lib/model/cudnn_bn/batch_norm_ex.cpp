// cuDNN's fused NHWC batch norm on LibTorch tensors (lib/model/cudnn_bn/batch_norm_ex.h).
//
// The Ex calls are cuDNN's legacy API, deprecated since cuDNN 9 (still shipped in 9.x) in favour
// of its graph API (cudnn-frontend's batch-norm graphs); CMake builds this folder only where the
// header still declares them, and the deprecation warnings are silenced here, the one file that
// calls them.
#include "lib/model/cudnn_bn/batch_norm_ex.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "lib/model/cudnn_bn/cudnn_handle.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace workload::cudnn_bn {

namespace {

constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;

cudnnBatchNormOps_t cudnn_ops(BnOps ops) {
  switch (ops) {
    case BnOps::kBn:
      return CUDNN_BATCHNORM_OPS_BN;
    case BnOps::kBnRelu:
      return CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
    case BnOps::kBnAddRelu:
      return CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION;
  }
  TORCH_CHECK(false, "cudnn_bn: unknown BnOps ", static_cast<int>(ops));
}

cudnnDataType_t cudnn_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return CUDNN_DATA_FLOAT;
    case at::kHalf:
      return CUDNN_DATA_HALF;
    case at::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    default:
      TORCH_CHECK(false, "cudnn_bn: expected float, half or bfloat16 input, got ", t);
  }
}

/// Everything a call of one shape, dtype and BnOps needs but its pointers: descriptors (one for
/// x, y, z and their gradients, all alike) and the sizes cuDNN asks for. Immutable once built.
struct CallLayout {
  TensorDescriptor data;
  TensorDescriptor param;  ///< float [1, C, 1, 1], derived from `data`
  ActivationDescriptor relu;
  bool has_activation = false;
  bool has_add = false;
  std::size_t forward_workspace = 0;
  std::size_t backward_workspace = 0;
  std::size_t reserve = 0;
  /// CUDNN_STATUS_SUCCESS, or why cuDNN refused this shape (a size query's status).
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;

  cudnnTensorDescriptor_t z() const { return has_add ? data.get() : nullptr; }
  cudnnActivationDescriptor_t activation() const { return has_activation ? relu.get() : nullptr; }
};

/// Fills `l` for x's shape and dtype; the first failing call's status, or CUDNN_STATUS_SUCCESS.
cudnnStatus_t fill_layout(CallLayout& l, const at::Tensor& x, BnOps ops, cudnnHandle_t h) {
  l.has_activation = ops != BnOps::kBn;
  l.has_add = ops == BnOps::kBnAddRelu;
  const cudnnTensorDescriptor_t d = l.data.get();
  cudnnStatus_t s = cudnnSetTensor4dDescriptor(
      d, CUDNN_TENSOR_NHWC, cudnn_dtype(x.scalar_type()), static_cast<int>(x.size(0)),
      static_cast<int>(x.size(1)), static_cast<int>(x.size(2)), static_cast<int>(x.size(3)));
  if (s == CUDNN_STATUS_SUCCESS) s = cudnnDeriveBNTensorDescriptor(l.param.get(), d, kMode);
  if (s == CUDNN_STATUS_SUCCESS) {
    s = cudnnSetActivationDescriptor(l.relu.get(), CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0);
  }
  if (s == CUDNN_STATUS_SUCCESS) {
    s = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
        h, kMode, cudnn_ops(ops), d, l.z(), d, l.param.get(), l.activation(), &l.forward_workspace);
  }
  if (s == CUDNN_STATUS_SUCCESS) {
    s = cudnnGetBatchNormalizationBackwardExWorkspaceSize(
        h, kMode, cudnn_ops(ops), d, l.has_activation ? d : nullptr, d, l.z(), d, l.param.get(),
        l.activation(), &l.backward_workspace);
  }
  if (s == CUDNN_STATUS_SUCCESS) {
    s = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(h, kMode, cudnn_ops(ops),
                                                             l.activation(), d, &l.reserve);
  }
  return s;
}

/// The layouts met so far, built once each (a ResNet-50 step meets some twenty), refused ones too.
/// Thread-safe: the forward and the backward of one layer run on different threads.
const CallLayout& layout_for(const at::Tensor& x, BnOps ops) {
  using Key = std::tuple<int, at::ScalarType, BnOps, std::array<std::int64_t, 4>>;
  static std::mutex mutex;
  // Never destroyed, as the handles (cudnn_handle.cpp): nothing of cuDNN's is released at the
  // program's exit, when its libraries may be going.
  static auto* const layouts = new std::map<Key, std::unique_ptr<const CallLayout>>();
  const Key key{static_cast<int>(x.get_device()),
                x.scalar_type(),
                ops,
                {x.size(0), x.size(1), x.size(2), x.size(3)}};
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*layouts)[key];
  if (!slot) {  // the size queries need a handle: only on x's device, once per layout
    const c10::cuda::CUDAGuard guard(x.device());
    auto l = std::make_unique<CallLayout>();
    l->status = fill_layout(*l, x, ops, current_handle());
    slot = std::move(l);
  }
  return *slot;
}

/// layout_for(), refused layouts thrown as the status cuDNN gave.
const CallLayout& usable_layout(const at::Tensor& x, BnOps ops) {
  const CallLayout& l = layout_for(x, ops);
  TORCH_CHECK(l.status == CUDNN_STATUS_SUCCESS, "cudnn_bn: cuDNN refuses ", x.scalar_type(), " ",
              x.sizes(), " for BnOps ", static_cast<int>(ops), ": ", cudnnGetErrorString(l.status));
  return l;
}

void check_input(const char* what, const at::Tensor& t, const at::Tensor& x) {
  TORCH_CHECK(t.defined() && t.is_cuda() && t.device() == x.device(), "cudnn_bn: expected ", what,
              " on ", x.device(), ", got ", t.defined() ? t.device().str() : "an undefined tensor");
  TORCH_CHECK(t.sizes() == x.sizes() && t.scalar_type() == x.scalar_type() &&
                  t.is_contiguous(at::MemoryFormat::ChannelsLast),
              "cudnn_bn: expected ", what, " channels_last-contiguous of ", x.sizes(), " and ",
              x.scalar_type(), ", got ", t.sizes(), " ", t.scalar_type());
}

void check_param(const char* what, const at::Tensor& t, const at::Tensor& x) {
  TORCH_CHECK(t.defined() && t.device() == x.device() && t.scalar_type() == at::kFloat &&
                  t.dim() == 1 && t.size(0) == x.size(1) && t.is_contiguous(),
              "cudnn_bn: expected ", what, " float [", x.size(1), "] on ", x.device());
}

/// x, weight and bias, as forward and backward both take them.
void check_inputs(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  BnOps ops) {
  TORCH_CHECK(x.defined() && x.is_cuda() && x.dim() == 4,
              "cudnn_bn: expected a 4-D CUDA tensor x, got ",
              x.defined() ? x.sizes() : at::IntArrayRef{});
  check_input("x", x, x);
  TORCH_CHECK(ops != BnOps::kBnAddRelu || x.size(1) % 4 == 0,
              "cudnn_bn: BN+add+ReLU needs C a multiple of 4, got ", x.size(1));
  check_param("weight", weight, x);
  check_param("bias", bias, x);
}

at::Tensor bytes(std::size_t n, const at::Tensor& like) {
  return at::empty({static_cast<std::int64_t>(n)}, like.options().dtype(at::kByte));
}

}  // namespace

bool cudnn_accepts(const at::Tensor& x, BnOps ops) {
  return layout_for(x, ops).status == CUDNN_STATUS_SUCCESS;
}

BnForward batch_norm_forward(const at::Tensor& x, const at::Tensor& z, const at::Tensor& weight,
                             const at::Tensor& bias, const at::Tensor& running_mean,
                             const at::Tensor& running_var, double momentum, double eps,
                             BnOps ops) {
  check_inputs(x, weight, bias, ops);
  if (ops == BnOps::kBnAddRelu) check_input("z", z, x);
  check_param("running_mean", running_mean, x);
  check_param("running_var", running_var, x);
  TORCH_CHECK(eps >= CUDNN_BN_MIN_EPSILON, "cudnn_bn: expected eps >= ", CUDNN_BN_MIN_EPSILON,
              ", got ", eps);
  const c10::cuda::CUDAGuard guard(x.device());
  const cudnnHandle_t h = current_handle();
  const CallLayout& l = usable_layout(x, ops);
  BnForward r;
  r.y = at::empty_like(x, at::MemoryFormat::ChannelsLast);
  r.save_mean = at::empty({x.size(1)}, weight.options());
  r.save_inv_var = at::empty({x.size(1)}, weight.options());
  r.reserve = bytes(l.reserve, x);
  const at::Tensor workspace = bytes(l.forward_workspace, x);
  const float one = 1.0f, zero = 0.0f;
  const cudnnTensorDescriptor_t d = l.data.get();
  WORKLOAD_CUDNN_CHECK(cudnnBatchNormalizationForwardTrainingEx(
      h, kMode, cudnn_ops(ops), &one, &zero, d, x.data_ptr(), l.z(),
      l.has_add ? z.data_ptr() : nullptr, d, r.y.data_ptr(), l.param.get(), weight.data_ptr(),
      bias.data_ptr(), momentum, running_mean.data_ptr(), running_var.data_ptr(), eps,
      r.save_mean.data_ptr(), r.save_inv_var.data_ptr(), l.activation(), workspace.data_ptr(),
      l.forward_workspace, r.reserve.data_ptr(), l.reserve));
  return r;
}

BnBackward batch_norm_backward(const at::Tensor& x, const at::Tensor& dy, const at::Tensor& weight,
                               const at::Tensor& bias, const BnForward& saved, double eps,
                               BnOps ops) {
  check_inputs(x, weight, bias, ops);
  check_input("dy", dy, x);
  if (ops != BnOps::kBn) check_input("y", saved.y, x);
  const c10::cuda::CUDAGuard guard(x.device());
  const cudnnHandle_t h = current_handle();
  const CallLayout& l = usable_layout(x, ops);
  TORCH_CHECK(static_cast<std::size_t>(saved.reserve.numel()) == l.reserve,
              "cudnn_bn: the reserve space is not the one forward returned");
  BnBackward r;
  r.dx = at::empty_like(x, at::MemoryFormat::ChannelsLast);
  if (l.has_add) r.dz = at::empty_like(x, at::MemoryFormat::ChannelsLast);
  r.dweight = at::empty_like(weight);
  r.dbias = at::empty_like(bias);
  const at::Tensor workspace = bytes(l.backward_workspace, x);
  const float one = 1.0f, zero = 0.0f;
  const cudnnTensorDescriptor_t d = l.data.get();
  WORKLOAD_CUDNN_CHECK(cudnnBatchNormalizationBackwardEx(
      h, kMode, cudnn_ops(ops), &one, &zero, &one, &zero, d, x.data_ptr(),
      l.has_activation ? d : nullptr, l.has_activation ? saved.y.data_ptr() : nullptr, d,
      dy.data_ptr(), l.z(), l.has_add ? r.dz.data_ptr() : nullptr, d, r.dx.data_ptr(),
      l.param.get(), weight.data_ptr(), bias.data_ptr(), r.dweight.data_ptr(), r.dbias.data_ptr(),
      eps, saved.save_mean.data_ptr(), saved.save_inv_var.data_ptr(), l.activation(),
      workspace.data_ptr(), l.backward_workspace, saved.reserve.data_ptr(), l.reserve));
  return r;
}

}  // namespace workload::cudnn_bn
