// cuDNN graph-API fusions of a convolution with its batch norms, probed
// (lib/bench/cudnn_fusion_probe.h). Everything runs on the legacy default stream, as LibTorch's
// reference computations do, so no event orders them.
#include "lib/bench/cudnn_fusion_probe.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "lib/core/usage_error.h"

// The operation graph's and the plan's handle attributes are deprecated in cuDNN 9.x without a
// replacement in the backend API; they still work.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace workload::bench {

std::string ConvShape::name() const {
  std::ostringstream s;
  s << h << "x" << w << "x" << c << "-" << k << "r" << r << "s" << stride;
  return s.str();
}

ConvShape parse_conv_shape(const std::string& text, const char* flag) {
  static const std::regex kShape(R"((\d+)x(\d+)x(\d+)-(\d+)r(\d+)s(\d+))");
  std::smatch m;
  if (!std::regex_match(text, m, kShape)) {
    throw UsageError(std::string(flag) +
                     ": expected HxWxC-K r R s S (e.g. 56x56x64-256r1s1), got '" + text + "'");
  }
  ConvShape s;
  s.h = std::stoll(m[1]);
  s.w = std::stoll(m[2]);
  s.c = std::stoll(m[3]);
  s.k = std::stoll(m[4]);
  s.r = std::stoll(m[5]);
  s.stride = std::stoll(m[6]);
  if (s.h < 1 || s.w < 1 || s.c < 1 || s.k < 1 || s.r < 1 || s.r % 2 == 0 || s.stride < 1 ||
      s.h > 4096 || s.w > 4096 || s.c > 65536 || s.k > 65536 || s.r > 11 || s.stride > 4) {
    throw UsageError(std::string(flag) + ": '" + text +
                     "' is out of range (an odd R up to 11, stride 1 to 4, sides to 4096)");
  }
  return s;
}

std::vector<ConvShape> default_conv_shapes() {
  return {{64, 56, 56, 64, 3, 1},
          {64, 56, 56, 256, 1, 1},
          {1024, 14, 14, 256, 1, 1},
          {128, 56, 56, 128, 3, 2}};
}

namespace {

// --- cuDNN's backend API, checked and owned -----------------------------------------------------

/// A refused call: its status and cuDNN's own last message, which says why.
class CudnnRefusal : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void check(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  std::array<char, 1024> last{};
  cudnnGetLastErrorString(last.data(), last.size());
  std::string msg = std::string(what) + ": " + cudnnGetErrorString(s);
  if (last[0] != '\0') msg += " (" + std::string(last.data()) + ")";
  throw CudnnRefusal(msg);
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
  }
}

/// One backend descriptor, destroyed with its owner. Not copyable.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    check(cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor");
  }
  ~Desc() {
    if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Desc& operator=(Desc&& o) noexcept {
    if (this != &o) {
      if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
      d_ = std::exchange(o.d_, nullptr);
    }
    return *this;
  }

  cudnnBackendDescriptor_t get() const { return d_; }
  template <class T>
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values,
            std::int64_t count = 1) {
    check(cudnnBackendSetAttribute(d_, name, type, count, const_cast<T*>(values)),
          "cudnnBackendSetAttribute");
    return *this;
  }
  Desc& set_desc(cudnnBackendAttributeName_t name, const Desc& other) {
    cudnnBackendDescriptor_t o = other.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &o);
  }
  Desc& finalize(const char* what) {
    check(cudnnBackendFinalize(d_), what);
    return *this;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

/// The cuDNN handle of the probe, on the legacy default stream.
class Handle {
 public:
  Handle() {
    check(cudnnCreate(&h_), "cudnnCreate");
    check(cudnnSetStream(h_, nullptr), "cudnnSetStream");
  }
  ~Handle() { cudnnDestroy(h_); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  cudnnHandle_t get() const { return h_; }

 private:
  cudnnHandle_t h_ = nullptr;
};

/// A CUDA event pair timing one run on the default stream.
class EventPair {
 public:
  EventPair() {
    check_cuda(cudaEventCreate(&a_), "cudaEventCreate");
    check_cuda(cudaEventCreate(&b_), "cudaEventCreate");
  }
  ~EventPair() {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  /// A run of `fn` in microseconds: `repeats` runs queued back to back between two events (so the
  /// host's launch time hides behind the device's work), the best of three such rounds, after
  /// two untimed runs.
  double best_us(const std::function<void()>& fn, int repeats) {
    fn();
    fn();
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    float best = std::numeric_limits<float>::max();
    for (int round = 0; round < 3; ++round) {
      check_cuda(cudaEventRecord(a_, nullptr), "cudaEventRecord");
      for (int i = 0; i < repeats; ++i) fn();
      check_cuda(cudaEventRecord(b_, nullptr), "cudaEventRecord");
      check_cuda(cudaEventSynchronize(b_), "cudaEventSynchronize");
      float ms = 0;
      check_cuda(cudaEventElapsedTime(&ms, a_, b_), "cudaEventElapsedTime");
      best = std::min(best, ms / static_cast<float>(repeats));
    }
    return 1000.0 * best;
  }

 private:
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

cudnnDataType_t cudnn_type(at::ScalarType t) {
  switch (t) {
    case at::kHalf:
      return CUDNN_DATA_HALF;
    case at::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    case at::kFloat:
      return CUDNN_DATA_FLOAT;
    default:
      throw std::invalid_argument("cudnn_fusion_probe: no cuDNN type for this tensor");
  }
}

// --- the graph under construction ---------------------------------------------------------------

/// A graph's tensors (each with a unique id, an NHWC layout over dims [N, C, H, W]) and operations,
/// and the device pointers its variant pack binds.
class Graph {
 public:
  /// A tensor of dims [n, c, h, w] laid out NHWC (a per-channel one is [1, c, 1, 1]).
  std::int64_t tensor(cudnnDataType_t type, std::array<std::int64_t, 4> d, bool is_virtual = false,
                      bool by_value = false) {
    const std::int64_t uid = next_uid_++;
    const std::array<std::int64_t, 4> strides = {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
    const std::int64_t alignment = 16;
    Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, d.data(), 4)
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4)
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment);
    if (is_virtual) t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual);
    if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &by_value);
    t.finalize("tensor descriptor");
    tensors_.emplace(uid, std::move(t));
    return uid;
  }
  /// A virtual FP32 intermediate of x's dims.
  std::int64_t virtual_like(std::array<std::int64_t, 4> d) {
    return tensor(CUDNN_DATA_FLOAT, d, /*is_virtual=*/true);
  }
  const Desc& t(std::int64_t uid) const { return tensors_.at(uid); }

  void conv(cudnnBackendDescriptorType_t op_type, const ConvShape& s, std::int64_t x,
            std::int64_t w, std::int64_t y) {
    const std::int64_t dims = 2;
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    const std::array<std::int64_t, 2> pad = {s.pad(), s.pad()}, stride = {s.stride, s.stride},
                                      dilation = {1, 1};
    Desc c(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    c.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &dims)
        .set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &comp)
        .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode)
        .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, pad.data(), 2)
        .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, pad.data(), 2)
        .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, stride.data(), 2)
        .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, dilation.data(), 2)
        .finalize("convolution descriptor");
    const float alpha = 1.0f, beta = 0.0f;
    Desc op(op_type);
    if (op_type == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR) {
      op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, t(x))
          .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, t(w))
          .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, t(y))
          .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, c)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, &alpha)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, &beta);
    } else if (op_type == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR) {
      // x: the input, w: dw (the output), y: dy.
      op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, t(x))
          .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, t(w))
          .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, t(y))
          .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, c)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, &alpha)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, &beta);
    } else {
      // x: dx (the output), w: the filter, y: dy.
      op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, t(x))
          .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, t(w))
          .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, t(y))
          .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, c)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, &alpha)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, &beta);
    }
    op.finalize("convolution operation");
    keep_.push_back(std::move(c));
    ops_.push_back(std::move(op));
  }

  /// y = mode(x[, b]); RELU_BWD: dx = x > 0 ? dy : 0 with x the forward input (x, dy -> y = dx).
  /// `alpha2` scales b (ADD with -1 subtracts it).
  void pointwise(cudnnPointwiseMode_t mode, std::int64_t x, std::int64_t b, std::int64_t y,
                 float alpha2 = 1.0f) {
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &prec)
        .finalize("pointwise descriptor");
    Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    if (mode == CUDNN_POINTWISE_RELU_BWD) {
      op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, t(x))
          .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, t(b))
          .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, t(y));
    } else {
      op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, t(x));
      if (b >= 0) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, t(b));
      op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, t(y));
      if (alpha2 != 1.0f) {
        op.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, &alpha2);
      }
    }
    op.finalize("pointwise operation");
    keep_.push_back(std::move(pw));
    ops_.push_back(std::move(op));
  }

  void genstats(std::int64_t x, std::int64_t sum, std::int64_t sqsum) {
    const cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    Desc op(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, &mode)
        .set(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &prec)
        .set_desc(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, t(x))
        .set_desc(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, t(sum))
        .set_desc(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, t(sqsum))
        .finalize("genstats operation");
    ops_.push_back(std::move(op));
  }

  /// The batch norm's weight gradients and its data gradient's coefficients.
  void bn_bwd_weights(std::int64_t x, std::int64_t dy, std::int64_t mean, std::int64_t invstd,
                      std::int64_t scale, std::int64_t dscale, std::int64_t dbias,
                      std::int64_t eq_dy, std::int64_t eq_x, std::int64_t eq_bias) {
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    Desc op(CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &prec)
        .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_X_DESC, t(x))
        .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DY_DESC, t(dy))
        .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MEAN_DESC, t(mean))
        .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_INVSTD_DESC, t(invstd))
        .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_BN_SCALE_DESC, t(scale))
        .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_SCALE_DESC, t(dscale))
        .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_BIAS_DESC, t(dbias))
        .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_DY_SCALE_DESC, t(eq_dy))
        .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_X_SCALE_DESC, t(eq_x))
        .set_desc(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_BIAS, t(eq_bias))
        .finalize("bn bwd weights operation");
    ops_.push_back(std::move(op));
  }

  /// The uids, in the order: sum, sqsum, scale, bias, prev running mean, prev running var,
  /// updated running mean, updated running var, saved mean, saved inv std, eq scale, eq bias,
  /// epsilon, exponential average factor, accumulation count.
  void bn_finalize(const std::array<std::int64_t, 15>& u) {
    const cudnnBnFinalizeStatsMode_t mode = CUDNN_BN_FINALIZE_STATISTICS_TRAINING;
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    Desc op(CUDNN_BACKEND_OPERATION_BN_FINALIZE_STATISTICS_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_BN_FINALIZE_STATS_MODE, CUDNN_TYPE_BN_FINALIZE_STATS_MODE, &mode)
        .set(CUDNN_ATTR_OPERATION_BN_FINALIZE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &prec)
        .set_desc(CUDNN_ATTR_OPERATION_BN_FINALIZE_Y_SUM_DESC, t(u[0]))
        .set_desc(CUDNN_ATTR_OPERATION_BN_FINALIZE_Y_SQ_SUM_DESC, t(u[1]))
        .set_desc(CUDNN_ATTR_OPERATION_BN_FINALIZE_SCALE_DESC, t(u[2]))
        .set_desc(CUDNN_ATTR_OPERATION_BN_FINALIZE_BIAS_DESC, t(u[3]))
        .set_desc(CUDNN_ATTR_OPERATION_BN_FINALIZE_PREV_RUNNING_MEAN_DESC, t(u[4]))
        .set_desc(CUDNN_ATTR_OPERATION_BN_FINALIZE_PREV_RUNNING_VAR_DESC, t(u[5]))
        .set_desc(CUDNN_ATTR_OPERATION_BN_FINALIZE_UPDATED_RUNNING_MEAN_DESC, t(u[6]))
        .set_desc(CUDNN_ATTR_OPERATION_BN_FINALIZE_UPDATED_RUNNING_VAR_DESC, t(u[7]))
        .set_desc(CUDNN_ATTR_OPERATION_BN_FINALIZE_SAVED_MEAN_DESC, t(u[8]))
        .set_desc(CUDNN_ATTR_OPERATION_BN_FINALIZE_SAVED_INV_STD_DESC, t(u[9]))
        .set_desc(CUDNN_ATTR_OPERATION_BN_FINALIZE_EQ_SCALE_DESC, t(u[10]))
        .set_desc(CUDNN_ATTR_OPERATION_BN_FINALIZE_EQ_BIAS_DESC, t(u[11]))
        .set_desc(CUDNN_ATTR_OPERATION_BN_FINALIZE_EPSILON_DESC, t(u[12]))
        .set_desc(CUDNN_ATTR_OPERATION_BN_FINALIZE_EXP_AVERATE_FACTOR_DESC, t(u[13]))
        .set_desc(CUDNN_ATTR_OPERATION_BN_FINALIZE_ACCUM_COUNT_DESC, t(u[14]))
        .finalize("bn finalize operation");
    ops_.push_back(std::move(op));
  }

  /// The operation graph, finalized on `h`.
  Desc finalize(cudnnHandle_t h) const {
    std::vector<cudnnBackendDescriptor_t> ops;
    ops.reserve(ops_.size());
    for (const Desc& o : ops_) ops.push_back(o.get());
    Desc g(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    g.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &h)
        .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.data(),
             static_cast<std::int64_t>(ops.size()))
        .finalize("operation graph");
    return g;
  }

 private:
  std::int64_t next_uid_ = 1;
  std::map<std::int64_t, Desc> tensors_;
  std::vector<Desc> keep_;  // descriptors the operations refer to
  std::vector<Desc> ops_;
};

/// A finalized execution plan and its workspace size.
struct Plan {
  Desc plan;
  std::int64_t workspace = 0;
};

/// The engine configurations heuristics `mode` offers for `graph` (at most `max`).
std::vector<Desc> engine_configs(const Desc& graph, cudnnBackendHeurMode_t mode, int max) {
  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode)
      .finalize("engine heuristics");
  std::int64_t count = 0;
  check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
        "engine heuristics' result count");
  count = std::min<std::int64_t>(count, max);
  std::vector<Desc> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (std::int64_t i = 0; i < count; ++i) {
    cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(cfgs.back().get());
  }
  std::int64_t got = 0;
  if (count > 0) {
    check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()),
          "engine heuristics' results");
  }
  cfgs.erase(cfgs.begin() + std::min(got, count), cfgs.end());
  return cfgs;
}

/// The engine of a configuration: its global index and whether it compiles at run time.
std::pair<std::int64_t, bool> engine_of(const Desc& cfg) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = engine.get();
  std::int64_t n = 0;
  check(cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e),
        "engine of a configuration");
  std::int64_t index = -1;
  check(
      cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index),
      "engine global index");
  std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> notes{};
  std::int64_t count = 0;
  bool rtc = false;
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &count,
                               notes.data()) == CUDNN_STATUS_SUCCESS) {
    for (std::int64_t i = 0; i < count; ++i) {
      rtc = rtc || notes[static_cast<std::size_t>(i)] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;
    }
  }
  return {index, rtc};
}

/// The tensors bound to a graph's uids, and host scalars passed by value.
struct Bindings {
  std::vector<std::int64_t> uids;
  std::vector<void*> ptrs;
  void bind(std::int64_t uid, const at::Tensor& t) {
    uids.push_back(uid);
    ptrs.push_back(t.data_ptr());
  }
  void bind_host(std::int64_t uid, void* p) {
    uids.push_back(uid);
    ptrs.push_back(p);
  }
};

/// The variant pack binding `b` and a workspace to a plan's run (built once, run many times).
Desc variant_pack(Bindings& b, const at::Tensor& workspace) {
  Desc vp(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  void* ws = workspace.defined() ? workspace.data_ptr() : nullptr;
  vp.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, b.uids.data(),
         static_cast<std::int64_t>(b.uids.size()))
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, b.ptrs.data(),
           static_cast<std::int64_t>(b.ptrs.size()))
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &ws)
      .finalize("variant pack");
  return vp;
}

void execute(cudnnHandle_t h, const Plan& plan, const Desc& variant_pack) {
  check(cudnnBackendExecute(h, plan.plan.get(), variant_pack.get()), "cudnnBackendExecute");
}

/// Builds the graph, tries the engines of heuristics A and the fallback, times each plan that
/// builds, and leaves the fastest run's outputs in the bound tensors. Fills row.engines, best_us,
/// best_engine and status.
void run_graph(cudnnHandle_t h, const Graph& graph, Bindings& b, const FusionProbeOptions& o,
               ProbeRow& row) {
  const Desc g = graph.finalize(h);
  EventPair events;
  std::map<std::int64_t, bool> tried;
  // The engine configurations outlive the plans finalized from them (cuDNN may keep pointers).
  std::vector<std::vector<Desc>> configs;
  const Plan* best = nullptr;
  std::vector<std::unique_ptr<Plan>> plans;
  at::Tensor best_ws;
  for (const auto& [mode, name] :
       {std::pair{CUDNN_HEUR_MODE_A, "A"}, std::pair{CUDNN_HEUR_MODE_FALLBACK, "fallback"}}) {
    try {
      configs.push_back(engine_configs(g, mode, o.max_plans));
    } catch (const CudnnRefusal& e) {
      row.engines.push_back({-1, false, name, false, e.what(), 0, 0});
      continue;
    }
    for (const Desc& cfg : configs.back()) {
      EngineTry t;
      t.heuristics = name;
      try {
        std::tie(t.global_index, t.runtime_compiled) = engine_of(cfg);
      } catch (const CudnnRefusal& e) {
        t.status = e.what();
        row.engines.push_back(t);
        continue;
      }
      if (tried.count(t.global_index) != 0) continue;  // offered by both modes
      tried[t.global_index] = true;
      auto plan = std::make_unique<Plan>(Plan{Desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR), 0});
      try {
        const auto start = std::chrono::steady_clock::now();
        plan->plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &h)
            .set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg)
            .finalize("execution plan");
        t.build_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        std::int64_t n = 0;
        check(cudnnBackendGetAttribute(plan->plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                       CUDNN_TYPE_INT64, 1, &n, &plan->workspace),
              "plan workspace size");
        t.built = true;
        const at::Tensor ws =
            plan->workspace > 0 ? at::empty({plan->workspace},
                                            at::TensorOptions().device(at::kCUDA).dtype(at::kByte))
                                : at::Tensor();
        const Desc vp = variant_pack(b, ws);
        t.best_us = events.best_us([&] { execute(h, *plan, vp); }, o.repeats);
        if (best == nullptr || t.best_us < row.best_us) {
          row.best_us = t.best_us;
          row.best_engine = t.global_index;
          best = plan.get();
          best_ws = ws;
        }
      } catch (const CudnnRefusal& e) {
        t.status = e.what();
      }
      plans.push_back(std::move(plan));
      row.engines.push_back(t);
    }
  }
  if (best == nullptr) {
    row.status = "no engine ran this graph";
    return;
  }
  execute(h, *best, variant_pack(b, best_ws));  // the outputs left for the check: the fastest's
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  row.status = "ok";
}

// --- the patterns -------------------------------------------------------------------------------

double rel_err(const at::Tensor& a, const at::Tensor& ref) {
  const at::Tensor r = ref.to(at::kDouble);
  const double denom = r.norm().item<double>();
  return (a.to(at::kDouble) - r).norm().item<double>() / std::max(denom, 1e-30);
}

/// Random tensors of one shape and dtype, NHWC, and their FP32 values (what the reference uses).
struct Inputs {
  at::Tensor x, w, dy;     ///< the convolution's input, filter and output gradient (dtype)
  at::Tensor scale, bias;  ///< the prologue's per-channel scale and bias, [1, C, 1, 1]
  at::Tensor xf, wf, dyf;  ///< FP32 copies of the rounded values
  at::Tensor scalef, biasf;
};

at::Tensor nhwc(const at::Tensor& t) { return t.contiguous(at::MemoryFormat::ChannelsLast); }

Inputs make_inputs(const ConvShape& s, std::int64_t n, at::ScalarType dtype) {
  const auto f = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  Inputs in;
  in.x = nhwc(at::randn({n, s.c, s.h, s.w}, f)).to(dtype);
  in.w = nhwc(at::randn({s.k, s.c, s.r, s.r}, f) / std::sqrt(double(s.c * s.r * s.r))).to(dtype);
  in.dy = nhwc(at::randn({n, s.k, s.out_h(), s.out_w()}, f)).to(dtype);
  in.scale = nhwc(at::rand({1, s.c, 1, 1}, f) + 0.5).to(dtype);
  in.bias = nhwc(at::randn({1, s.c, 1, 1}, f) * 0.1).to(dtype);
  in.xf = in.x.to(at::kFloat);
  in.wf = in.w.to(at::kFloat);
  in.dyf = in.dy.to(at::kFloat);
  in.scalef = in.scale.to(at::kFloat);
  in.biasf = in.bias.to(at::kFloat);
  return in;
}

std::array<std::int64_t, 4> dims(const at::Tensor& t) {
  return {t.size(0), t.size(1), t.size(2), t.size(3)};
}

at::Tensor conv_ref(const at::Tensor& x, const at::Tensor& w, const ConvShape& s) {
  return at::conv2d(x, w, {}, {s.stride, s.stride}, {s.pad(), s.pad()});
}

/// (grad_input, grad_weight) of the reference convolution.
std::pair<at::Tensor, at::Tensor> conv_backward_ref(const at::Tensor& dy, const at::Tensor& x,
                                                    const at::Tensor& w, const ConvShape& s) {
  auto r =
      at::convolution_backward(dy, x, w, at::OptionalIntArrayRef(), {s.stride, s.stride},
                               {s.pad(), s.pad()}, {1, 1}, false, {0, 0}, 1, {true, true, false});
  return {std::get<0>(r), std::get<1>(r)};
}

at::Tensor channel_sum(const at::Tensor& t) { return t.sum({0, 2, 3}); }

/// Adds an output's relative L2 error against its reference to the row.
void add_error(ProbeRow& row, const std::string& name, const at::Tensor& got,
               const at::Tensor& ref) {
  row.errors.emplace_back(name, rel_err(got, ref));
}

/// scale -> bias -> ReLU on x (the previous batch norm applied, as the record's convolutions do in
/// their prologue), into a virtual FP32 tensor: its uid. Binds the scale and the bias.
std::int64_t sbr_prologue(Graph& g, Bindings& b, const Inputs& in, std::int64_t x) {
  const cudnnDataType_t dt = cudnn_type(in.x.scalar_type());
  const std::int64_t sc = g.tensor(dt, dims(in.scale)), bi = g.tensor(dt, dims(in.bias));
  const std::int64_t t1 = g.virtual_like(dims(in.x)), t2 = g.virtual_like(dims(in.x)),
                     t3 = g.virtual_like(dims(in.x));
  g.pointwise(CUDNN_POINTWISE_MUL, x, sc, t1);
  g.pointwise(CUDNN_POINTWISE_ADD, t1, bi, t2);
  g.pointwise(CUDNN_POINTWISE_RELU_FWD, t2, -1, t3);
  b.bind(sc, in.scale);
  b.bind(bi, in.bias);
  return t3;
}

/// The prologue's FP32 reference.
at::Tensor sbr_reference(const Inputs& in) { return at::relu(in.xf * in.scalef + in.biasf); }

void probe_forward(cudnnHandle_t h, const ConvShape& s, const Inputs& in,
                   const std::string& pattern, const FusionProbeOptions& o, ProbeRow& row) {
  const cudnnDataType_t dt = cudnn_type(in.x.scalar_type());
  const auto n = in.x.size(0);
  Graph g;
  Bindings b;
  const std::int64_t x = g.tensor(dt, dims(in.x)), w = g.tensor(dt, dims(in.w));
  at::Tensor y = nhwc(at::empty({n, s.k, s.out_h(), s.out_w()}, in.x.options()));
  const std::int64_t yid = g.tensor(dt, dims(y));
  at::Tensor sum = at::zeros({1, s.k, 1, 1}, in.xf.options()), sqsum = at::zeros_like(sum);
  const bool sbr = pattern == "sbr_conv_genstats";
  const std::int64_t conv_in = sbr ? sbr_prologue(g, b, in, x) : x;
  g.conv(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, s, conv_in, w, yid);
  if (pattern != "conv") {
    const std::int64_t su = g.tensor(CUDNN_DATA_FLOAT, dims(sum)),
                       sq = g.tensor(CUDNN_DATA_FLOAT, dims(sqsum));
    g.genstats(yid, su, sq);
    b.bind(su, sum);
    b.bind(sq, sqsum);
  }
  b.bind(x, in.x);
  b.bind(w, in.w);
  b.bind(yid, y);
  run_graph(h, g, b, o, row);
  if (row.status != "ok" || !o.check) return;
  const at::Tensor a = sbr ? sbr_reference(in) : in.xf;
  const at::Tensor yref = conv_ref(a, in.wf, s);
  add_error(row, "y", y, yref);
  add_error(row, "y_plain_rounding", yref.to(y.scalar_type()), yref);  // the dtype's own rounding
  if (pattern != "conv") {
    add_error(row, "sum", sum.flatten(), channel_sum(yref));
    add_error(row, "sqsum", sqsum.flatten(), channel_sum(yref * yref));
    // Statistics of the rounded output, as a separate pass over the stored y would see them.
    const at::Tensor yr = yref.to(y.scalar_type()).to(at::kFloat);
    add_error(row, "sum_plain", channel_sum(yr), channel_sum(yref));
  }
}

void probe_wgrad(cudnnHandle_t h, const ConvShape& s, const Inputs& in, const std::string& pattern,
                 const FusionProbeOptions& o, ProbeRow& row) {
  const cudnnDataType_t dt = cudnn_type(in.x.scalar_type());
  Graph g;
  Bindings b;
  const std::int64_t x = g.tensor(dt, dims(in.x)), dy = g.tensor(dt, dims(in.dy));
  at::Tensor dw = nhwc(at::empty({s.k, s.c, s.r, s.r}, in.x.options()));
  const std::int64_t dwid = g.tensor(dt, dims(dw));
  const bool sbr = pattern == "sbr_wgrad";
  const std::int64_t conv_in = sbr ? sbr_prologue(g, b, in, x) : x;
  g.conv(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, s, conv_in, dwid, dy);
  b.bind(x, in.x);
  b.bind(dy, in.dy);
  b.bind(dwid, dw);
  run_graph(h, g, b, o, row);
  if (row.status != "ok" || !o.check) return;
  const at::Tensor a = sbr ? sbr_reference(in) : in.xf;
  const at::Tensor dwref = conv_backward_ref(in.dyf, a, in.wf, s).second;
  add_error(row, "dw", dw, dwref);
  add_error(row, "dw_plain_rounding", dwref.to(dw.scalar_type()), dwref);
}

/// The batch statistics of x as the forward's BN would have them: mean, inverse std (eps 1e-5).
std::pair<at::Tensor, at::Tensor> batch_stats(const at::Tensor& xf) {
  const at::Tensor mean = xf.mean({0, 2, 3}, true);
  const at::Tensor var = xf.var({0, 2, 3}, /*unbiased=*/false, true);
  return {mean, at::rsqrt(var + 1e-5)};
}

/// The plain data gradient.
void probe_dgrad(cudnnHandle_t h, const ConvShape& s, const Inputs& in, const FusionProbeOptions& o,
                 ProbeRow& row) {
  const cudnnDataType_t dt = cudnn_type(in.x.scalar_type());
  Graph g;
  Bindings b;
  const std::int64_t w = g.tensor(dt, dims(in.w)), dy = g.tensor(dt, dims(in.dy));
  at::Tensor dx = nhwc(at::empty({in.x.size(0), s.c, s.h, s.w}, in.x.options()));
  const std::int64_t dxid = g.tensor(dt, dims(dx));
  g.conv(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, s, dxid, w, dy);
  b.bind(w, in.w);
  b.bind(dy, in.dy);
  b.bind(dxid, dx);
  run_graph(h, g, b, o, row);
  if (row.status != "ok" || !o.check) return;
  const at::Tensor dxref = conv_backward_ref(in.dyf, in.xf, in.wf, s).first;
  add_error(row, "dx", dx, dxref);
  add_error(row, "dx_plain_rounding", dxref.to(dx.scalar_type()), dxref);
}

void probe_dgrad_drelu_bnbwd(cudnnHandle_t h, const ConvShape& s, const Inputs& in,
                             const FusionProbeOptions& o, ProbeRow& row) {
  const cudnnDataType_t dt = cudnn_type(in.x.scalar_type());
  const auto fopt = in.xf.options();
  Graph g;
  Bindings b;
  const std::int64_t w = g.tensor(dt, dims(in.w)), dy = g.tensor(dt, dims(in.dy));
  // dgrad -> dReLU -> the BN's weight gradients and its data gradient's coefficients, as cuDNN's
  // DgradDreluBNBwdWeight engine takes them (its documented pattern, and the cudnn-frontend
  // sample's): the forward's BN recomputed from x as ((x - mean) * inv_std) * scale + bias, all
  // four per-channel tensors FP32, and dReLU's output dz a real tensor (dBNApply reads it next).
  // x here is the previous BN's input (this convolution's input before that BN and ReLU).
  const auto [mean, invstd] = batch_stats(in.xf);
  const at::Tensor bn_scale = nhwc(at::rand({1, s.c, 1, 1}, fopt) + 0.5);
  const at::Tensor bn_bias = nhwc(at::randn({1, s.c, 1, 1}, fopt) * 0.1);
  at::Tensor dz = at::empty_like(in.x);
  const auto p = dims(bn_scale);
  const std::int64_t x = g.tensor(dt, dims(in.x)), dzid = g.tensor(dt, dims(dz));
  const std::int64_t me = g.tensor(CUDNN_DATA_FLOAT, p), is = g.tensor(CUDNN_DATA_FLOAT, p),
                     bs = g.tensor(CUDNN_DATA_FLOAT, p), bb = g.tensor(CUDNN_DATA_FLOAT, p),
                     ds = g.tensor(CUDNN_DATA_FLOAT, p), db = g.tensor(CUDNN_DATA_FLOAT, p),
                     ed = g.tensor(CUDNN_DATA_FLOAT, p), ex = g.tensor(CUDNN_DATA_FLOAT, p),
                     eb = g.tensor(CUDNN_DATA_FLOAT, p);
  const std::int64_t dconv = g.virtual_like(dims(in.x)), centred = g.virtual_like(dims(in.x)),
                     normed = g.virtual_like(dims(in.x)), scaled = g.virtual_like(dims(in.x)),
                     xbn = g.virtual_like(dims(in.x));
  g.conv(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, s, dconv, w, dy);
  g.pointwise(CUDNN_POINTWISE_ADD, x, me, centred, /*alpha2=*/-1.0f);
  g.pointwise(CUDNN_POINTWISE_MUL, centred, is, normed);
  g.pointwise(CUDNN_POINTWISE_MUL, normed, bs, scaled);
  g.pointwise(CUDNN_POINTWISE_ADD, scaled, bb, xbn);
  g.pointwise(CUDNN_POINTWISE_RELU_BWD, xbn, dconv, dzid);
  g.bn_bwd_weights(x, dzid, me, is, bs, ds, db, ed, ex, eb);
  const at::Tensor meanc = nhwc(mean), invstdc = nhwc(invstd);
  at::Tensor dscale = at::zeros({1, s.c, 1, 1}, fopt), dbias = at::zeros_like(dscale),
             eq_dy = at::zeros_like(dscale), eq_x = at::zeros_like(dscale),
             eq_b = at::zeros_like(dscale);
  for (const auto& [uid, t] : std::vector<std::pair<std::int64_t, at::Tensor>>{{w, in.w},
                                                                               {dy, in.dy},
                                                                               {x, in.x},
                                                                               {dzid, dz},
                                                                               {me, meanc},
                                                                               {is, invstdc},
                                                                               {bs, bn_scale},
                                                                               {bb, bn_bias},
                                                                               {ds, dscale},
                                                                               {db, dbias},
                                                                               {ed, eq_dy},
                                                                               {ex, eq_x},
                                                                               {eb, eq_b}}) {
    b.bind(uid, t);
  }
  run_graph(h, g, b, o, row);
  if (row.status != "ok" || !o.check) return;
  // The reference: the same chain in FP32, then BN's backward through x.
  const at::Tensor xhat = (in.xf - mean) * invstd;
  const at::Tensor xbn_ref = xhat * bn_scale + bn_bias;
  const at::Tensor dconv_ref = conv_backward_ref(in.dyf, at::relu(xbn_ref), in.wf, s).first;
  const at::Tensor dz_ref = dconv_ref * (xbn_ref > 0);
  const double m = double(in.x.size(0) * s.h * s.w);
  const at::Tensor dbias_ref = channel_sum(dz_ref), dscale_ref = channel_sum(dz_ref * xhat);
  add_error(row, "dz", dz, dz_ref);
  add_error(row, "dscale", dscale.flatten(), dscale_ref);
  add_error(row, "dbias", dbias.flatten(), dbias_ref);
  const at::Tensor dx_ref =
      bn_scale * invstd / m *
      (m * dz_ref - dbias_ref.view({1, -1, 1, 1}) - xhat * dscale_ref.view({1, -1, 1, 1}));
  // dBNApply's formula with the coefficients cuDNN returned, whatever their convention.
  add_error(row, "dx_from_coefficients", eq_dy * dz_ref + eq_x * in.xf + eq_b, dx_ref);
}

void probe_dbn_apply(cudnnHandle_t h, const Inputs& in, const FusionProbeOptions& o,
                     ProbeRow& row) {
  const cudnnDataType_t dt = cudnn_type(in.x.scalar_type());
  const auto fopt = in.xf.options();
  const auto c = in.x.size(1);
  const at::Tensor a = nhwc(at::randn({1, c, 1, 1}, fopt)),
                   bb = nhwc(at::randn({1, c, 1, 1}, fopt)),
                   cc = nhwc(at::randn({1, c, 1, 1}, fopt));
  const at::Tensor dz = nhwc(at::randn_like(in.xf)).to(in.x.scalar_type());
  at::Tensor dx = at::empty_like(in.x);
  Graph g;
  Bindings b;
  const std::int64_t dzi = g.tensor(dt, dims(dz)), xi = g.tensor(dt, dims(in.x)),
                     ai = g.tensor(CUDNN_DATA_FLOAT, dims(a)),
                     bi = g.tensor(CUDNN_DATA_FLOAT, dims(bb)),
                     ci = g.tensor(CUDNN_DATA_FLOAT, dims(cc)), dxi = g.tensor(dt, dims(dx));
  const std::int64_t t1 = g.virtual_like(dims(in.x)), t2 = g.virtual_like(dims(in.x)),
                     t3 = g.virtual_like(dims(in.x));
  g.pointwise(CUDNN_POINTWISE_MUL, dzi, ai, t1);
  g.pointwise(CUDNN_POINTWISE_MUL, xi, bi, t2);
  g.pointwise(CUDNN_POINTWISE_ADD, t1, t2, t3);
  g.pointwise(CUDNN_POINTWISE_ADD, t3, ci, dxi);
  for (const auto& [uid, t] : std::vector<std::pair<std::int64_t, at::Tensor>>{
           {dzi, dz}, {xi, in.x}, {ai, a}, {bi, bb}, {ci, cc}, {dxi, dx}}) {
    b.bind(uid, t);
  }
  run_graph(h, g, b, o, row);
  if (row.status != "ok" || !o.check) return;
  const at::Tensor ref = a * dz.to(at::kFloat) + bb * in.xf + cc;
  add_error(row, "dx", dx, ref);
  add_error(row, "dx_plain_rounding", ref.to(dx.scalar_type()), ref);
}

void probe_bn_finalize(cudnnHandle_t h, const Inputs& in, const FusionProbeOptions& o,
                       ProbeRow& row) {
  const cudnnDataType_t dt = cudnn_type(in.x.scalar_type());
  const auto fopt = in.xf.options();
  const auto c = in.x.size(1);
  const std::int64_t count = in.x.size(0) * in.x.size(2) * in.x.size(3);
  auto per_c = [&] { return nhwc(at::zeros({1, c, 1, 1}, fopt)); };
  const at::Tensor sum = nhwc(channel_sum(in.xf).view({1, c, 1, 1})),
                   sqsum = nhwc(channel_sum(in.xf * in.xf).view({1, c, 1, 1}));
  const at::Tensor scale = nhwc(at::rand({1, c, 1, 1}, fopt) + 0.5),
                   bias = nhwc(at::randn({1, c, 1, 1}, fopt) * 0.1);
  const at::Tensor prev_mean = nhwc(at::randn({1, c, 1, 1}, fopt)),
                   prev_var = nhwc(at::rand({1, c, 1, 1}, fopt) + 0.5);
  at::Tensor run_mean = per_c(), run_var = per_c(), saved_mean = per_c(), saved_invstd = per_c();
  at::Tensor eq_scale = nhwc(at::zeros({1, c, 1, 1}, in.x.options())),
             eq_bias = nhwc(at::zeros({1, c, 1, 1}, in.x.options()));
  double epsilon = 1e-5, factor = 0.1;
  std::int64_t accum = count;
  Graph g;
  Bindings b;
  std::array<std::int64_t, 15> u{};
  const auto p = dims(sum);
  for (int i = 0; i < 10; ++i) u[static_cast<std::size_t>(i)] = g.tensor(CUDNN_DATA_FLOAT, p);
  u[10] = g.tensor(dt, p);
  u[11] = g.tensor(dt, p);
  u[12] = g.tensor(CUDNN_DATA_DOUBLE, {1, 1, 1, 1}, false, true);
  u[13] = g.tensor(CUDNN_DATA_DOUBLE, {1, 1, 1, 1}, false, true);
  u[14] = g.tensor(CUDNN_DATA_INT64, {1, 1, 1, 1}, false, true);
  g.bn_finalize(u);
  const std::array<at::Tensor, 12> ts = {sum,        sqsum,        scale,    bias,
                                         prev_mean,  prev_var,     run_mean, run_var,
                                         saved_mean, saved_invstd, eq_scale, eq_bias};
  for (std::size_t i = 0; i < ts.size(); ++i) b.bind(u[i], ts[i]);
  b.bind_host(u[12], &epsilon);
  b.bind_host(u[13], &factor);
  b.bind_host(u[14], &accum);
  run_graph(h, g, b, o, row);
  if (row.status != "ok" || !o.check) return;
  const at::Tensor mean = in.xf.to(at::kDouble).mean({0, 2, 3}, true);
  const at::Tensor var = in.xf.to(at::kDouble).var({0, 2, 3}, false, true);
  const at::Tensor invstd = at::rsqrt(var + epsilon);
  add_error(row, "saved_mean", saved_mean, mean);
  add_error(row, "saved_inv_std", saved_invstd, invstd);
  // PyTorch's running statistics: momentum 0.1, the unbiased variance.
  add_error(row, "running_mean", run_mean, 0.9 * prev_mean + 0.1 * mean);
  add_error(row, "running_var", run_var,
            0.9 * prev_var + 0.1 * var * (double(count) / double(count - 1)));
  add_error(row, "eq_scale", eq_scale, scale * invstd);
  add_error(row, "eq_bias", eq_bias, bias - mean * scale * invstd);
}

at::ScalarType dtype_of(const std::string& name) {
  if (name == "fp16") return at::kHalf;
  if (name == "bf16") return at::kBFloat16;
  throw UsageError("--dtypes: expected fp16 or bf16, got '" + name + "'");
}

/// The direction of a convolution pattern ("fprop", "wgrad", "dgrad"), or "" for BN-only ones.
std::string direction_of(const std::string& pattern) {
  if (pattern == "conv" || pattern == "conv_genstats" || pattern == "sbr_conv_genstats") {
    return "fprop";
  }
  if (pattern == "wgrad" || pattern == "sbr_wgrad") return "wgrad";
  if (pattern == "dgrad" || pattern == "dgrad_drelu_bnbwd") return "dgrad";
  return "";
}

/// One pattern of one shape and dtype; a graph cuDNN refuses is a row saying why.
ProbeRow probe_one(cudnnHandle_t h, const ConvShape& s, const std::string& dtype, const Inputs& in,
                   const std::string& pattern, const FusionProbeOptions& o) {
  ProbeRow row{s.name(), dtype, pattern, "", {}, 0, -1, 0, 0, {}};
  try {
    const std::string dir = direction_of(pattern);
    if (dir == "fprop") {
      probe_forward(h, s, in, pattern, o, row);
    } else if (dir == "wgrad") {
      probe_wgrad(h, s, in, pattern, o, row);
    } else if (pattern == "dgrad") {
      probe_dgrad(h, s, in, o, row);
    } else if (pattern == "dgrad_drelu_bnbwd") {
      probe_dgrad_drelu_bnbwd(h, s, in, o, row);
    } else if (pattern == "dbn_apply") {
      probe_dbn_apply(h, in, o, row);
    } else {
      probe_bn_finalize(h, in, o, row);
    }
  } catch (const CudnnRefusal& e) {
    row.status = std::string("graph refused: ") + e.what();
  }
  return row;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// Every pattern of one shape and dtype, appended to `rows` and printed to stderr as it comes (a
/// run cut short keeps what it measured), each with its wall time; past the budget a row is
/// listed as skipped.
void probe_shape(cudnnHandle_t h, const ConvShape& s, const std::string& dname,
                 const FusionProbeOptions& o, std::chrono::steady_clock::time_point start,
                 std::vector<ProbeRow>& rows) {
  const auto spent = [&] { return o.budget_s > 0 && seconds_since(start) > o.budget_s; };
  at::manual_seed(45);
  const Inputs in = spent() ? Inputs{} : make_inputs(s, o.batch, dtype_of(dname));
  std::map<std::string, double> plain;  // direction -> the plain convolution's time
  for (const std::string& pattern : o.patterns) {
    const auto row_start = std::chrono::steady_clock::now();
    ProbeRow row{s.name(), dname, pattern, "", {}, 0, -1, 0, 0, {}};
    if (!in.x.defined() || spent()) {
      row.status = "skipped: --budget-s reached";
    } else {
      row = probe_one(h, s, dname, in, pattern, o);
    }
    const std::string dir = direction_of(pattern);
    if (pattern == "conv" || pattern == "wgrad" || pattern == "dgrad") plain[dir] = row.best_us;
    if (!dir.empty() && plain.count(dir) != 0) row.plain_us = plain[dir];
    row.seconds = seconds_since(row_start);
    const std::string line = probe_rows_to_table({row});
    std::fprintf(stderr, "cudnn_fusion_probe: %.1f s %s", row.seconds,
                 line.substr(line.rfind('\n', line.size() - 2) + 1).c_str());
    rows.push_back(std::move(row));
  }
}

}  // namespace

std::vector<ProbeRow> run_fusion_probe(const FusionProbeOptions& options) {
  const auto& all = probe_patterns();
  for (const std::string& p : options.patterns) {
    if (std::find(all.begin(), all.end(), p) == all.end()) {
      throw UsageError("--patterns: unknown pattern '" + p + "'");
    }
  }
  for (const std::string& d : options.dtypes) dtype_of(d);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    throw std::runtime_error("cudnn_fusion_probe: no CUDA device");
  }
  // FP32 references must be FP32: no TF32 in LibTorch's convolutions.
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setBenchmarkCuDNN(false);
  Handle handle;
  std::vector<ProbeRow> rows;
  const auto start = std::chrono::steady_clock::now();
  for (const ConvShape& s : options.shapes) {
    for (const std::string& dname : options.dtypes) {
      probe_shape(handle.get(), s, dname, options, start, rows);
    }
  }
  return rows;
}

nlohmann::json probe_rows_to_json(const std::vector<ProbeRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const ProbeRow& r : rows) {
    nlohmann::json j = {{"shape", r.shape},       {"dtype", r.dtype},
                        {"pattern", r.pattern},   {"status", r.status},
                        {"best_us", r.best_us},   {"best_engine", r.best_engine},
                        {"plain_us", r.plain_us}, {"seconds", r.seconds}};
    j["engines"] = nlohmann::json::array();
    for (const EngineTry& e : r.engines) {
      j["engines"].push_back({{"global_index", e.global_index},
                              {"runtime_compiled", e.runtime_compiled},
                              {"heuristics", e.heuristics},
                              {"built", e.built},
                              {"status", e.status},
                              {"build_ms", e.build_ms},
                              {"best_us", e.best_us}});
    }
    j["errors"] = nlohmann::json::object();
    for (const auto& [name, err] : r.errors) j["errors"][name] = err;
    out.push_back(j);
  }
  return out;
}

namespace {

/// "2, 3 rtc (not built)": the engines a row tried; build_ms: the fastest one's build time.
std::string engines_text(const ProbeRow& r, double* build_ms) {
  std::string engines;
  for (const EngineTry& e : r.engines) {
    if (e.global_index < 0) continue;
    if (!engines.empty()) engines += ", ";
    engines += std::to_string(e.global_index) + (e.runtime_compiled ? " rtc" : "") +
               (e.built ? "" : " (not built)");
    if (e.global_index == r.best_engine) *build_ms = e.build_ms;
  }
  return engines;
}

std::string printed(const char* format, double v) {
  std::array<char, 64> buf{};
  std::snprintf(buf.data(), buf.size(), format, v);
  return buf.data();
}

}  // namespace

std::string probe_rows_to_table(const std::vector<ProbeRow>& rows) {
  std::ostringstream s;
  s << "| shape (N as given) | dtype | pattern | engines offered (global index; rtc: "
       "runtime-compiled) | best µs | vs plain | build ms (best) | errors against FP32 |\n"
    << "|---|---|---|---|---|---|---|---|\n";
  for (const ProbeRow& r : rows) {
    double build_ms = 0;
    const std::string engines = engines_text(r, &build_ms);
    s << "| " << r.shape << " | " << r.dtype << " | " << r.pattern << " | ";
    if (r.status != "ok") {
      s << (engines.empty() ? "none" : engines) << " | " << r.status << " | | | |\n";
      continue;
    }
    s << engines << " | " << printed("%.1f", r.best_us) << " [" << r.best_engine << "] | ";
    const bool plain = r.pattern == "conv" || r.pattern == "wgrad" || r.pattern == "dgrad";
    if (r.plain_us > 0 && !plain) s << printed("%.2fx", r.best_us / r.plain_us);
    s << " | " << printed("%.1f", build_ms) << " | ";
    for (std::size_t i = 0; i < r.errors.size(); ++i) {
      s << (i != 0 ? ", " : "") << r.errors[i].first << " " << printed("%.1e", r.errors[i].second);
    }
    s << " |\n";
  }
  return s.str();
}

}  // namespace workload::bench
