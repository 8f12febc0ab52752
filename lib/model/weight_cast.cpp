// The low-precision copies of a model's weights, made together (lib/model/weight_cast.h).
#include "lib/model/weight_cast.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/version.h>

#include <string>

namespace workload {

namespace {

// dst[i] = src[i] cast to dst[i]'s dtype: one multi-tensor copy where LibTorch has it (on CUDA a
// kernel for the whole list when the lists' sizes and strides match, as here), else one copy each.
void copy_together(std::vector<torch::Tensor>& dst, const std::vector<torch::Tensor>& src) {
  if (dst.empty()) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
  at::_foreach_copy_(dst, src);
#else
  for (std::size_t i = 0; i < dst.size(); ++i) dst[i].copy_(src[i]);
#endif
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The node: forward casts every input to `dtype`, backward every gradient back.
struct CastTogether : public torch::autograd::Function<CastTogether> {
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs, at::ScalarType dtype) {
    ctx->saved_data["from"] = static_cast<std::int64_t>(inputs.front().scalar_type());
    ctx->set_materialize_grads(false);  // a copy that reached no loss: no gradient, not zeros
    std::vector<torch::Tensor> out;
    out.reserve(inputs.size());
    // empty_like keeps each input's layout (channels_last stays channels_last), as .to() does.
    for (const torch::Tensor& t : inputs)
      out.push_back(at::empty_like(t, t.options().dtype(dtype)));
    copy_together(out, inputs.vec());
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto from = static_cast<at::ScalarType>(ctx->saved_data["from"].toInt());
    // One gradient an input, and none for `dtype` (not a tensor).
    variable_list out(grads.size() + 1);
    std::vector<torch::Tensor> dst, src;
    dst.reserve(grads.size());
    src.reserve(grads.size());
    for (std::size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) continue;  // an output that reached no loss
      // The gradient's own layout, as .to()'s backward keeps it.
      out[i] = at::empty_like(grads[i], grads[i].options().dtype(from));
      dst.push_back(out[i]);
      src.push_back(grads[i]);
    }
    copy_together(dst, src);
    return out;
  }
};

}  // namespace

std::vector<torch::Tensor> cast_together(const std::vector<torch::Tensor>& tensors,
                                         at::ScalarType dtype) {
  if (tensors.empty()) return {};
  TORCH_CHECK(at::isFloatingType(dtype), "cast_together: expected a floating dtype, got ", dtype);
  const torch::Tensor& first = tensors.front();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    TORCH_CHECK(tensors[i].defined(), "cast_together: tensor ", i, " is undefined");
    TORCH_CHECK(
        tensors[i].scalar_type() == first.scalar_type() && tensors[i].device() == first.device(),
        "cast_together: tensor ", i, " is ", tensors[i].scalar_type(), " on ", tensors[i].device(),
        ", tensor 0 ", first.scalar_type(), " on ", first.device(),
        ": expected one dtype and one device");
  }
  return CastTogether::apply(at::TensorList(tensors), dtype);
}

ForwardWeights::ForwardWeights(const std::vector<torch::Tensor>& weights, at::ScalarType dtype) {
  const std::vector<torch::Tensor> copies = cast_together(weights, dtype);
  copies_.reserve(copies.size());
  for (std::size_t i = 0; i < copies.size(); ++i) {
    copies_.emplace(weights[i].unsafeGetTensorImpl(), copies[i]);
  }
}

const torch::Tensor& ForwardWeights::operator[](const torch::Tensor& weight) const {
  const auto it = copies_.find(weight.unsafeGetTensorImpl());
  return it == copies_.end() ? weight : it->second;
}

}  // namespace workload
