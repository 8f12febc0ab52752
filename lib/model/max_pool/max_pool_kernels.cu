// One thread per output (forward) or input (backward) position and a vector of channels
// (lib/model/max_pool/max_pool_kernels.h).
#include "lib/model/max_pool/max_pool_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "common/cuda_check.h"

namespace workload {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float as_float(float v) { return v; }
__device__ __forceinline__ float as_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float as_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// V values of T in one aligned load or store (16 bytes where the channels allow it).
template <typename T, int V>
struct alignas(sizeof(T) * V) Values {
  T v[V];
};
template <int V>
struct alignas(V) Bytes {
  std::uint8_t v[V];
};

// The position (n, row, column) and channel group of flat item i, channels fastest.
struct Position {
  std::int64_t n, h, w, group;
};
__device__ __forceinline__ Position position(std::int64_t i, std::int64_t groups,
                                             std::int64_t width, std::int64_t height) {
  Position p;
  p.group = i % groups;
  i /= groups;
  p.w = i % width;
  i /= width;
  p.h = i % height;
  p.n = i / height;
  return p;
}

template <typename T, int V>
__global__ void max_pool_forward_nhwc_argmax8(const T* __restrict__ x, T* __restrict__ y,
                                              std::uint8_t* __restrict__ argmax,
                                              MaxPoolGeometry g) {
  const std::int64_t groups = g.channels / V;
  const std::int64_t items = g.batch * g.out_h * g.out_w * groups;
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= items) return;
  const Position o = position(i, groups, g.out_w, g.out_h);
  float best[V];
  Values<T, V> out;
  Bytes<V> arg;
  for (int v = 0; v < V; ++v) {
    best[v] = -INFINITY;
    out.v[v] = from_float<T>(-INFINITY);
    arg.v[v] = kNoArgmax;
  }
  const std::int64_t h0 = o.h * g.stride - g.pad, w0 = o.w * g.stride - g.pad;
  const T* plane = x + o.n * g.in_h * g.in_w * g.channels + o.group * V;
  for (int kh = 0; kh < g.kernel; ++kh) {
    const std::int64_t ih = h0 + kh;
    if (ih < 0 || ih >= g.in_h) continue;
    for (int kw = 0; kw < g.kernel; ++kw) {
      const std::int64_t iw = w0 + kw;
      if (iw < 0 || iw >= g.in_w) continue;
      const Values<T, V> in =
          *reinterpret_cast<const Values<T, V>*>(plane + (ih * g.in_w + iw) * g.channels);
      for (int v = 0; v < V; ++v) {
        const float f = as_float(in.v[v]);
        // LibTorch's rule: a strictly larger value or a NaN takes the window.
        if (f > best[v] || isnan(f)) {
          best[v] = f;
          out.v[v] = in.v[v];
          arg.v[v] = static_cast<std::uint8_t>(kh * g.kernel + kw);
        }
      }
    }
  }
  const std::int64_t at = ((o.n * g.out_h + o.h) * g.out_w + o.w) * g.channels + o.group * V;
  *reinterpret_cast<Values<T, V>*>(y + at) = out;
  if (argmax != nullptr) *reinterpret_cast<Bytes<V>*>(argmax + at) = arg;
}

template <typename T, int V>
__global__ void max_pool_backward_nhwc_argmax8(const T* __restrict__ dy,
                                               const std::uint8_t* __restrict__ argmax,
                                               T* __restrict__ dx, MaxPoolGeometry g) {
  const std::int64_t groups = g.channels / V;
  const std::int64_t items = g.batch * g.in_h * g.in_w * groups;
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= items) return;
  const Position p = position(i, groups, g.in_w, g.in_h);
  // The windows holding (h, w), as LibTorch's backward finds them.
  const std::int64_t oh0 = p.h + g.pad < g.kernel ? 0 : (p.h + g.pad - g.kernel) / g.stride + 1;
  const std::int64_t oh1 = min((p.h + g.pad) / g.stride + 1, g.out_h);
  const std::int64_t ow0 = p.w + g.pad < g.kernel ? 0 : (p.w + g.pad - g.kernel) / g.stride + 1;
  const std::int64_t ow1 = min((p.w + g.pad) / g.stride + 1, g.out_w);
  float sum[V];
  for (int v = 0; v < V; ++v) sum[v] = 0.f;
  const std::int64_t base = p.n * g.out_h * g.out_w * g.channels + p.group * V;
  for (std::int64_t oh = oh0; oh < oh1; ++oh) {
    for (std::int64_t ow = ow0; ow < ow1; ++ow) {
      const int here = static_cast<int>((p.h - (oh * g.stride - g.pad)) * g.kernel +
                                        (p.w - (ow * g.stride - g.pad)));
      const std::int64_t at = base + (oh * g.out_w + ow) * g.channels;
      const Bytes<V> arg = *reinterpret_cast<const Bytes<V>*>(argmax + at);
      const Values<T, V> d = *reinterpret_cast<const Values<T, V>*>(dy + at);
      for (int v = 0; v < V; ++v) {
        if (arg.v[v] == here) sum[v] += as_float(d.v[v]);
      }
    }
  }
  Values<T, V> out;
  for (int v = 0; v < V; ++v) out.v[v] = from_float<T>(sum[v]);
  *reinterpret_cast<Values<T, V>*>(dx + ((p.n * g.in_h + p.h) * g.in_w + p.w) * g.channels +
                                   p.group * V) = out;
}

unsigned blocks(std::int64_t items) {
  return static_cast<unsigned>((items + kThreads - 1) / kThreads);
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Calls launch(width, grid) with width 16 bytes of T's channels a thread where the channels and
// every pointer allow it, 1 otherwise, and grid the blocks for `positions` times the channel
// groups; then checks the launch.
template <typename T, typename Launch>
void launch_by_width(const MaxPoolGeometry& g, std::int64_t positions,
                     std::initializer_list<const void*> pointers, Launch launch) {
  constexpr int kWide = 16 / sizeof(T);
  bool wide = g.channels % kWide == 0;
  for (const void* p : pointers) wide = wide && aligned16(p);
  if (wide) {
    launch(std::integral_constant<int, kWide>{}, blocks(positions * (g.channels / kWide)));
  } else {
    launch(std::integral_constant<int, 1>{}, blocks(positions * g.channels));
  }
  WORKLOAD_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void forward_as(const void* x, void* y, std::uint8_t* argmax, const MaxPoolGeometry& g,
                cudaStream_t stream) {
  const auto* in = static_cast<const T*>(x);
  auto* out = static_cast<T*>(y);
  launch_by_width<T>(g, g.batch * g.out_h * g.out_w, {x, y}, [&](auto width, unsigned grid) {
    max_pool_forward_nhwc_argmax8<T, decltype(width)::value>
        <<<grid, kThreads, 0, stream>>>(in, out, argmax, g);
  });
}

template <typename T>
void backward_as(const void* dy, const std::uint8_t* argmax, void* dx, const MaxPoolGeometry& g,
                 cudaStream_t stream) {
  const auto* d = static_cast<const T*>(dy);
  auto* out = static_cast<T*>(dx);
  launch_by_width<T>(g, g.batch * g.in_h * g.in_w, {dy, dx}, [&](auto width, unsigned grid) {
    max_pool_backward_nhwc_argmax8<T, decltype(width)::value>
        <<<grid, kThreads, 0, stream>>>(d, argmax, out, g);
  });
}

// Calls f(Tag<T>{}) with the element type T that `dtype` names.
template <typename T>
struct Tag {
  using type = T;
};
template <typename F>
void by_dtype(PoolDtype dtype, F&& f) {
  switch (dtype) {
    case PoolDtype::kFloat:
      return f(Tag<float>{});
    case PoolDtype::kHalf:
      return f(Tag<__half>{});
    case PoolDtype::kBFloat16:
      return f(Tag<__nv_bfloat16>{});
  }
}

}  // namespace

void launch_max_pool_forward(const void* x, void* y, std::uint8_t* argmax, const MaxPoolGeometry& g,
                             PoolDtype dtype, cudaStream_t stream) {
  if (g.batch * g.channels * g.out_h * g.out_w == 0) return;
  by_dtype(dtype,
           [&](auto tag) { forward_as<typename decltype(tag)::type>(x, y, argmax, g, stream); });
}

void launch_max_pool_backward(const void* dy, const std::uint8_t* argmax, void* dx,
                              const MaxPoolGeometry& g, PoolDtype dtype, cudaStream_t stream) {
  if (g.batch * g.channels * g.in_h * g.in_w == 0) return;
  by_dtype(dtype,
           [&](auto tag) { backward_as<typename decltype(tag)::type>(dy, argmax, dx, g, stream); });
}

}  // namespace workload
