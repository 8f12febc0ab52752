// The model's max pool (lib/model/max_pool.h): this build's kernels (max_pool/) behind one autograd
// node where they take the tensor, LibTorch's max_pool2d otherwise.
#include "lib/model/max_pool.h"

#include <torch/nn/functional/pooling.h>

#include <cstdint>

#if defined(WORKLOAD_HAVE_MAX_POOL_KERNELS)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/autograd.h>

#include "lib/model/max_pool/max_pool_kernels.h"
#endif

namespace workload {
#if defined(WORKLOAD_HAVE_MAX_POOL_KERNELS)
namespace {

// The geometry max_pool_kernels_take() accepts, from the options alone: a square window up to
// kMaxPoolKernel with equal strides and paddings, the padding at most half the window (LibTorch's
// own bound), no dilation, no ceil mode.
struct Window {
  int kernel = 0;
  int stride = 0;
  int pad = 0;
};

bool square_window(const torch::nn::MaxPool2dOptions& o, Window* w) {
  const auto k = *o.kernel_size();
  const auto s = *o.stride();
  const auto p = *o.padding();
  const auto d = *o.dilation();
  if (k[0] != k[1] || s[0] != s[1] || p[0] != p[1] || d[0] != 1 || d[1] != 1 || o.ceil_mode()) {
    return false;
  }
  if (k[0] < 1 || k[0] > kMaxPoolKernel || s[0] < 1 || p[0] < 0 || 2 * p[0] > k[0]) return false;
  *w = Window{static_cast<int>(k[0]), static_cast<int>(s[0]), static_cast<int>(p[0])};
  return true;
}

std::int64_t pooled(std::int64_t in, const Window& w) {
  return (in + 2 * w.pad - w.kernel) / w.stride + 1;
}

// max_pool_kernels_take(), with the window it found in `w`.
bool kernels_window(const torch::Tensor& x, const torch::nn::MaxPool2dOptions& options, Window* w) {
  if (!x.defined() || !x.is_cuda() || x.dim() != 4 || !square_window(options, w)) return false;
  const auto t = x.scalar_type();
  if (t != at::kFloat && t != at::kHalf && t != at::kBFloat16) return false;
  if (!x.is_contiguous(at::MemoryFormat::ChannelsLast)) return false;
  return x.numel() > 0 && pooled(x.size(2), *w) > 0 && pooled(x.size(3), *w) > 0;
}

PoolDtype pool_dtype(at::ScalarType t) {
  switch (t) {
    case at::kHalf:
      return PoolDtype::kHalf;
    case at::kBFloat16:
      return PoolDtype::kBFloat16;
    default:
      return PoolDtype::kFloat;
  }
}

MaxPoolGeometry geometry(at::IntArrayRef in, const Window& w) {
  return MaxPoolGeometry{in[0],    in[1],    in[2], in[3], pooled(in[2], w), pooled(in[3], w),
                         w.kernel, w.stride, w.pad};
}

// y, and the argmax where `keep_argmax`, of x (channels-last, on its device's current stream).
std::pair<torch::Tensor, torch::Tensor> pool_forward(const torch::Tensor& x, const Window& w,
                                                     bool keep_argmax) {
  const MaxPoolGeometry g = geometry(x.sizes(), w);
  const auto last = at::MemoryFormat::ChannelsLast;
  torch::Tensor y = at::empty({g.batch, g.channels, g.out_h, g.out_w}, x.options(), last);
  torch::Tensor argmax;
  if (keep_argmax) argmax = at::empty(y.sizes(), x.options().dtype(at::kByte), last);
  launch_max_pool_forward(
      x.data_ptr(), y.data_ptr(), keep_argmax ? argmax.data_ptr<std::uint8_t>() : nullptr, g,
      pool_dtype(x.scalar_type()), at::cuda::getCurrentCUDAStream(x.device().index()));
  return {y, argmax};
}

// One node: the forward keeps the byte argmax, the backward gathers through it.
struct MaxPoolFunction : public torch::autograd::Function<MaxPoolFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               int64_t kernel, int64_t stride, int64_t pad) {
    const Window w{static_cast<int>(kernel), static_cast<int>(stride), static_cast<int>(pad)};
    auto [y, argmax] = pool_forward(x, w, /*keep_argmax=*/true);
    ctx->save_for_backward({argmax});
    ctx->saved_data["window"] = std::vector<int64_t>{kernel, stride, pad};
    ctx->saved_data["input_sizes"] = x.sizes().vec();
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::Tensor argmax = ctx->get_saved_variables()[0];
    const std::vector<int64_t> win = ctx->saved_data["window"].toIntVector();
    const std::vector<int64_t> in = ctx->saved_data["input_sizes"].toIntVector();
    const Window w{static_cast<int>(win[0]), static_cast<int>(win[1]), static_cast<int>(win[2])};
    const auto last = at::MemoryFormat::ChannelsLast;
    const torch::Tensor dy = grads[0].contiguous(last);
    const c10::cuda::CUDAGuard device(dy.device());
    torch::Tensor dx = at::empty(in, dy.options(), last);
    launch_max_pool_backward(dy.data_ptr(), argmax.data_ptr<std::uint8_t>(), dx.data_ptr(),
                             geometry(in, w), pool_dtype(dy.scalar_type()),
                             at::cuda::getCurrentCUDAStream(dy.device().index()));
    return {dx, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace
#endif

bool max_pool_kernels_take(const torch::Tensor& x, const torch::nn::MaxPool2dOptions& options) {
#if defined(WORKLOAD_HAVE_MAX_POOL_KERNELS)
  Window w;
  return kernels_window(x, options, &w);
#else
  (void)x;
  (void)options;
  return false;
#endif
}

torch::Tensor max_pool2d(const torch::Tensor& x, const torch::nn::MaxPool2dOptions& options) {
#if defined(WORKLOAD_HAVE_MAX_POOL_KERNELS)
  Window w;
  if (kernels_window(x, options, &w)) {
    const c10::cuda::CUDAGuard device(x.device());
    if (torch::GradMode::is_enabled() && x.requires_grad()) {
      return MaxPoolFunction::apply(x, w.kernel, w.stride, w.pad);
    }
    return pool_forward(x, w, /*keep_argmax=*/false).first;
  }
#endif
  return torch::nn::functional::max_pool2d(x, options);
}

}  // namespace workload
