// cuDNN's graph (backend) API, owned and checked: descriptors, operation graphs over NHWC tensors,
// the engines cuDNN's heuristics offer, execution plans and variant packs. What the fusion probe
// (lib/bench/cudnn_fusion_probe.h) and the fused convolutions build on (issue 45).
#pragma once

#include <ATen/core/Tensor.h>
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

namespace workload::cudnn_graph {

/// A refused call: its status and cuDNN's own last message, which says why.
class CudnnRefusal : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// \throws CudnnRefusal naming `what`, cuDNN's status and its last error message, unless `s` is
/// success.
void check(cudnnStatus_t s, const char* what);

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

/// The cuDNN data type of a tensor's scalar type (half, bfloat16, float).
/// \throws std::invalid_argument for another type.
cudnnDataType_t cudnn_type(at::ScalarType t);

/// A convolution's geometry: symmetric padding and stride (dilation 1), 2-D.
struct ConvGeometry {
  std::int64_t pad = 0;
  std::int64_t stride = 1;
};

/// A graph's tensors (each with a unique id, an NHWC layout over dims [N, C, H, W]) and operations,
/// and the device pointers its variant pack binds.
class Graph {
 public:
  /// A tensor of dims [n, c, h, w] laid out NHWC (a per-channel one is [1, c, 1, 1]).
  std::int64_t tensor(cudnnDataType_t type, std::array<std::int64_t, 4> d, bool is_virtual = false,
                      bool by_value = false);
  /// A virtual FP32 intermediate of x's dims.
  std::int64_t virtual_like(std::array<std::int64_t, 4> d);
  const Desc& t(std::int64_t uid) const { return tensors_.at(uid); }

  void conv(cudnnBackendDescriptorType_t op_type, const ConvGeometry& s, std::int64_t x,
            std::int64_t w, std::int64_t y);

  /// y = mode(x[, b]); RELU_BWD: dx = x > 0 ? dy : 0 with x the forward input (x, dy -> y = dx).
  /// `alpha2` scales b (ADD with -1 subtracts it).
  void pointwise(cudnnPointwiseMode_t mode, std::int64_t x, std::int64_t b, std::int64_t y,
                 float alpha2 = 1.0f);

  void genstats(std::int64_t x, std::int64_t sum, std::int64_t sqsum);

  /// The batch norm's weight gradients and its data gradient's coefficients.
  void bn_bwd_weights(std::int64_t x, std::int64_t dy, std::int64_t mean, std::int64_t invstd,
                      std::int64_t scale, std::int64_t dscale, std::int64_t dbias,
                      std::int64_t eq_dy, std::int64_t eq_x, std::int64_t eq_bias);

  /// The uids, in the order: sum, sqsum, scale, bias, prev running mean, prev running var,
  /// updated running mean, updated running var, saved mean, saved inv std, eq scale, eq bias,
  /// epsilon, exponential average factor, accumulation count.
  void bn_finalize(const std::array<std::int64_t, 15>& u);

  /// The operation graph, finalized on `h`.
  Desc finalize(cudnnHandle_t h) const;

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
std::vector<Desc> engine_configs(const Desc& graph, cudnnBackendHeurMode_t mode, int max);

/// What cuDNN says of the engine behind a configuration.
struct EngineInfo {
  std::int64_t global_index = -1;
  bool runtime_compiled = false;  ///< CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION
  /// CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC: two runs on the same inputs may differ in the last
  /// bits (an engine that reduces with atomics, in whatever order its blocks finish).
  bool nondeterministic = false;
};

/// The engine of a configuration and its notes.
EngineInfo engine_of(const Desc& cfg);

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
Desc variant_pack(Bindings& b, const at::Tensor& workspace);

/// Runs `plan` on `h`'s stream with the tensors of `variant_pack`.
void execute(cudnnHandle_t h, const Plan& plan, const Desc& variant_pack);

}  // namespace workload::cudnn_graph
