// The fused bottleneck's pieces on cuDNN's fused engines (lib/model/conv_bn_ops.h,
// cudnn_conv_bn_ops()): the convolution with its prologue and its output's sums (ConvBNfprop), and
// the weight gradient with the prologue recomputed (ConvBNwgrad), fp16, NHWC. The other pieces are
// the reference ones for now. Built where this build has cuDNN 9 (WORKLOAD_HAVE_CUDNN_GRAPH).
#include <ATen/ATen.h>
#include <ATen/cudnn/Handle.h>

#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "lib/model/conv_bn_ops.h"
#include "lib/model/cudnn_graph/backend.h"

// The plan's handle attribute is deprecated in cuDNN 9.x without a replacement in the backend API;
// it still works.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace workload {

namespace {

namespace cg = cudnn_graph;

std::array<std::int64_t, 4> dims(at::IntArrayRef s) { return {s[0], s[1], s[2], s[3]}; }

/// Which graph a plan runs.
enum class Kind { kConvStats, kWgrad };

/// What makes two calls the same plan: the graph, the shapes, the geometry, the prologue.
using PlanKey = std::tuple<int, std::vector<std::int64_t>, std::vector<std::int64_t>,
                           std::vector<std::int64_t>, std::int64_t, std::int64_t, bool, int>;

/// A graph built once, its plan, and the uids its variant pack binds. `plan` is empty where no
/// engine took the graph (`why` says what cuDNN said).
struct CachedPlan {
  cg::Graph graph;
  std::vector<std::vector<cg::Desc>> configs;  // outlive the plan finalized from one
  std::unique_ptr<cg::Plan> plan;
  std::string why;
  std::int64_t x = -1, w = -1, y = -1, sum = -1, sqsum = -1, scale = -1, bias = -1;
};

/// x (or the prologue's relu(x * scale + bias) of it) as the convolution's input, in `g`.
std::int64_t input_of(CachedPlan& p, cudnnDataType_t dt, at::IntArrayRef x, bool prologue) {
  p.x = p.graph.tensor(dt, dims(x));
  if (!prologue) return p.x;
  const std::array<std::int64_t, 4> per_channel = {1, x[1], 1, 1};
  p.scale = p.graph.tensor(dt, per_channel);
  p.bias = p.graph.tensor(dt, per_channel);
  const std::int64_t t1 = p.graph.virtual_like(dims(x)), t2 = p.graph.virtual_like(dims(x)),
                     t3 = p.graph.virtual_like(dims(x));
  p.graph.pointwise(CUDNN_POINTWISE_MUL, p.x, p.scale, t1);
  p.graph.pointwise(CUDNN_POINTWISE_ADD, t1, p.bias, t2);
  p.graph.pointwise(CUDNN_POINTWISE_RELU_FWD, t2, -1, t3);
  return t3;
}

/// The first engine of heuristics A, then of the fallback, whose plan builds.
void plan_first_engine(cudnnHandle_t h, CachedPlan& p) {
  const cg::Desc g = p.graph.finalize(h);
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    try {
      p.configs.push_back(cg::engine_configs(g, mode, 8));
    } catch (const cg::CudnnRefusal& e) {
      p.why = e.what();
      continue;
    }
    for (const cg::Desc& cfg : p.configs.back()) {
      auto plan = std::make_unique<cg::Plan>(
          cg::Plan{cg::Desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR), 0});
      try {
        plan->plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &h)
            .set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg)
            .finalize("execution plan");
        std::int64_t n = 0;
        cg::check(
            cudnnBackendGetAttribute(plan->plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                     CUDNN_TYPE_INT64, 1, &n, &plan->workspace),
            "plan workspace size");
      } catch (const cg::CudnnRefusal& e) {
        p.why = e.what();
        continue;
      }
      p.plan = std::move(plan);
      return;
    }
  }
  if (p.why.empty()) p.why = "the heuristics offered no engine";
}

/// Runs `p` with `b`'s tensors on the current stream, a workspace from LibTorch's allocator.
void run(const CachedPlan& p, cg::Bindings& b, const at::TensorOptions& o) {
  const cudnnHandle_t h = at::native::getCudnnHandle();  // bound to the current stream
  const at::Tensor ws =
      p.plan->workspace > 0 ? at::empty({p.plan->workspace}, o.dtype(at::kByte)) : at::Tensor();
  cg::execute(h, *p.plan, cg::variant_pack(b, ws));
}

class CudnnConvBnOps final : public ConvBnOps {
 public:
  ConvStats conv_stats(const torch::Tensor& x, const torch::Tensor& w, ConvSpec spec,
                       const std::optional<Prologue>& prologue) const override {
    const torch::Tensor wh = w.to(x.scalar_type()).contiguous(at::MemoryFormat::ChannelsLast);
    if (!takes(x)) return reference().conv_stats(x, wh, spec, prologue);
    const std::vector<std::int64_t> ys = out_sizes(x.sizes(), w.sizes(), spec);
    const CachedPlan* p = plan_for(Kind::kConvStats, x.sizes(), w.sizes(), ys, spec,
                                   prologue.has_value(), x.options());
    if (p == nullptr) return reference().conv_stats(x, wh, spec, prologue);
    ConvStats out;
    out.y = at::empty(ys, x.options(), at::MemoryFormat::ChannelsLast);
    const auto f = x.options().dtype(at::kFloat);
    out.sum = at::empty({1, ys[1], 1, 1}, f);
    out.sqsum = at::empty({1, ys[1], 1, 1}, f);
    cg::Bindings b;
    b.bind(p->x, x);
    b.bind(p->w, wh);
    b.bind(p->y, out.y);
    b.bind(p->sum, out.sum);
    b.bind(p->sqsum, out.sqsum);
    at::Tensor scale, bias;  // alive until the plan has run
    if (prologue) {
      scale = prologue->scale.to(x.scalar_type()).view({1, -1, 1, 1}).contiguous();
      bias = prologue->bias.to(x.scalar_type()).view({1, -1, 1, 1}).contiguous();
      b.bind(p->scale, scale);
      b.bind(p->bias, bias);
    }
    run(*p, b, x.options());
    out.sum = out.sum.view({-1});
    out.sqsum = out.sqsum.view({-1});
    return out;
  }

  torch::Tensor wgrad(const torch::Tensor& x, const torch::Tensor& dy, ConvSpec spec,
                      at::IntArrayRef w_sizes,
                      const std::optional<Prologue>& prologue) const override {
    if (!takes(x) || !takes(dy)) return reference().wgrad(x, dy, spec, w_sizes, prologue);
    const CachedPlan* p = plan_for(Kind::kWgrad, x.sizes(), w_sizes, dy.sizes().vec(), spec,
                                   prologue.has_value(), x.options());
    if (p == nullptr) return reference().wgrad(x, dy, spec, w_sizes, prologue);
    at::Tensor dw = at::empty(w_sizes, x.options(), at::MemoryFormat::ChannelsLast);
    cg::Bindings b;
    b.bind(p->x, x);
    b.bind(p->w, dw);
    b.bind(p->y, dy);
    at::Tensor scale, bias;
    if (prologue) {
      scale = prologue->scale.to(x.scalar_type()).view({1, -1, 1, 1}).contiguous();
      bias = prologue->bias.to(x.scalar_type()).view({1, -1, 1, 1}).contiguous();
      b.bind(p->scale, scale);
      b.bind(p->bias, bias);
    }
    run(*p, b, x.options());
    return dw;
  }

  // The rest: the reference pieces (LibTorch's kernels) until their engines are measured.
  BnFinal finalize(const torch::Tensor& sum, const torch::Tensor& sqsum, std::int64_t count,
                   const torch::Tensor& weight, const torch::Tensor& bias,
                   torch::Tensor& running_mean, torch::Tensor& running_var, double momentum,
                   double eps) const override {
    return reference().finalize(sum, sqsum, count, weight, bias, running_mean, running_var,
                                momentum, eps);
  }
  torch::Tensor dgrad(const torch::Tensor& dy, const torch::Tensor& w, ConvSpec spec,
                      at::IntArrayRef x_sizes) const override {
    return reference().dgrad(dy, w, spec, x_sizes);
  }
  BnGrads dgrad_drelu_bn(const torch::Tensor& dy, const torch::Tensor& w, ConvSpec spec,
                         const torch::Tensor& x, const BnFinal& bn_final,
                         const torch::Tensor& weight) const override {
    return reference().dgrad_drelu_bn(dy, w, spec, x, bn_final, weight);
  }
  BnGrads bn_grads(const torch::Tensor& dz, const torch::Tensor& x, const BnFinal& bn_final,
                   const torch::Tensor& weight) const override {
    return reference().bn_grads(dz, x, bn_final, weight);
  }
  torch::Tensor dbn_apply(const BnGrads& g, const torch::Tensor& x) const override {
    return reference().dbn_apply(g, x);
  }
  torch::Tensor output(const torch::Tensor& y, const BnFinal& bn, const torch::Tensor& r,
                       const BnFinal* res_bn) const override {
    return reference().output(y, bn, r, res_bn);
  }

 private:
  static const ConvBnOps& reference() { return reference_conv_bn_ops(); }

  /// The engines' documented inputs: fp16, 4-D, channels last, on a GPU.
  static bool takes(const torch::Tensor& t) {
    return t.is_cuda() && t.scalar_type() == at::kHalf && t.dim() == 4 &&
           t.is_contiguous(at::MemoryFormat::ChannelsLast);
  }

  static std::vector<std::int64_t> out_sizes(at::IntArrayRef x, at::IntArrayRef w, ConvSpec s) {
    return {x[0], w[0], (x[2] + 2 * s.pad - w[2]) / s.stride + 1,
            (x[3] + 2 * s.pad - w[3]) / s.stride + 1};
  }

  /// The plan of this graph and these shapes, built at its first call (before any capture: the
  /// eager warm-up makes them all); null where no engine takes it, said once on stderr.
  const CachedPlan* plan_for(Kind kind, at::IntArrayRef x, at::IntArrayRef w,
                             const std::vector<std::int64_t>& y, ConvSpec spec, bool prologue,
                             const at::TensorOptions& o) const {
    const PlanKey key{static_cast<int>(kind),
                      x.vec(),
                      w.vec(),
                      y,
                      spec.pad,
                      spec.stride,
                      prologue,
                      static_cast<int>(o.device().index())};
    const std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      auto p = std::make_unique<CachedPlan>();
      try {
        build(*p, kind, x, w, y, spec, prologue,
              cg::cudnn_type(c10::typeMetaToScalarType(o.dtype())));
      } catch (const cg::CudnnRefusal& e) {
        p->plan.reset();
        p->why = e.what();
      }
      if (!p->plan) {
        std::fprintf(stderr,
                     "notice: the fused bottleneck's %s of x %s, w %s runs on LibTorch's kernels "
                     "(cuDNN: %s)\n",
                     kind == Kind::kConvStats ? "convolution" : "weight gradient",
                     c10::str(x).c_str(), c10::str(w).c_str(), p->why.c_str());
      }
      it = plans_.emplace(key, std::move(p)).first;
    }
    return it->second->plan ? it->second.get() : nullptr;
  }

  static void build(CachedPlan& p, Kind kind, at::IntArrayRef x, at::IntArrayRef w,
                    const std::vector<std::int64_t>& y, ConvSpec spec, bool prologue,
                    cudnnDataType_t dt) {
    const std::int64_t in = input_of(p, dt, x, prologue);
    p.w = p.graph.tensor(dt, dims(w));
    p.y = p.graph.tensor(dt, dims(y));
    const cg::ConvGeometry geometry{spec.pad, spec.stride};
    if (kind == Kind::kConvStats) {
      p.graph.conv(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, geometry, in, p.w, p.y);
      const std::array<std::int64_t, 4> per_channel = {1, y[1], 1, 1};
      p.sum = p.graph.tensor(CUDNN_DATA_FLOAT, per_channel);
      p.sqsum = p.graph.tensor(CUDNN_DATA_FLOAT, per_channel);
      p.graph.genstats(p.y, p.sum, p.sqsum);
    } else {
      // x: the input, w: dw (the output), y: dy.
      p.graph.conv(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, geometry, in,
                   p.w, p.y);
    }
    plan_first_engine(at::native::getCudnnHandle(), p);
  }

  mutable std::mutex mutex_;  // the training thread's forward, autograd's thread's backward
  mutable std::map<PlanKey, std::unique_ptr<CachedPlan>> plans_;
};

}  // namespace

const ConvBnOps* cudnn_conv_bn_ops() {
  static const CudnnConvBnOps kOps;
  return &kOps;
}

}  // namespace workload
