// The low-precision copies of a model's weights under autocast, made together: one multi-tensor
// cast in forward and one in backward instead of one cast kernel each way per weight.
#pragma once

#include <torch/types.h>

#include <unordered_map>
#include <vector>

namespace workload {

/// `tensors` cast to `dtype` together, as one autograd node. The values are each
/// `tensor.to(dtype)`'s (the same rounding, the layout kept), and the node's backward gives each
/// tensor the gradient `.to()`'s backward would (its output's gradient cast back to the tensor's
/// dtype, the layout kept), also in one operation. On CUDA with LibTorch 2.2 or later each
/// direction is one multi-tensor kernel (`_foreach_copy_`, a launch per ~110 tensors or ~20 M
/// elements); elsewhere a copy per tensor, the same values.
///
/// The price of one node: every gradient leaves backward when the last of them has arrived, so
/// nothing can start on the first one early (DDP's per-bucket all-reduce overlapped with the rest
/// of backward, for one).
/// \throws c10::Error when the tensors differ in dtype or device, or `dtype` is not floating.
std::vector<torch::Tensor> cast_together(const std::vector<torch::Tensor>& tensors,
                                         at::ScalarType dtype);

/// The weights one forward uses: each module's own, or (made with the list) its low-precision copy
/// from cast_together. A value made for one forward, on one thread; the copies live as long as it
/// (and as the autograd graph that holds them).
class ForwardWeights {
 public:
  /// Every weight as it is: autocast, where it is on, casts each where a layer uses it.
  ForwardWeights() = default;
  /// `weights` cast to `dtype` together, now.
  ForwardWeights(const std::vector<torch::Tensor>& weights, at::ScalarType dtype);

  /// The copy of `weight` made here, or `weight` itself.
  const torch::Tensor& operator[](const torch::Tensor& weight) const;
  /// Whether any copy was made.
  bool cast() const { return !copies_.empty(); }

 private:
  std::unordered_map<const c10::TensorImpl*, torch::Tensor> copies_;
};

}  // namespace workload
