// The fused bottleneck's pieces on cuDNN's fused engines (lib/model/conv_bn_ops.h,
// cudnn_conv_bn_ops()): the convolution with its prologue and its output's sums (ConvBNfprop), the
// weight gradient with the prologue recomputed (ConvBNwgrad), the data gradient through ReLU into
// the BN's gradients (DgradDreluBNBwdWeight), dBNApply and the block's output (pointwise graphs),
// the block's input gradient with the shortcut's added in the data gradient's epilogue, fp16, NHWC.
// BN finalize, the input gradient's coefficients, and the last BN's and the shortcut's gradients
// in one kernel each (bn_stats/, where nvcc is found; else the last BNs' on the backward-weights
// node alone, where an engine takes it). The plain data gradient is the reference's. Built where
// this build has cuDNN 9 (WORKLOAD_HAVE_CUDNN_GRAPH).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cudnn/Handle.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "lib/model/conv_bn_ops.h"
#include "lib/model/cudnn_graph/backend.h"
#if defined(WORKLOAD_HAVE_BN_STATS_KERNELS)
#include "lib/model/bn_stats/bn_stats_kernels.h"
#endif

// The plan's handle attribute is deprecated in cuDNN 9.x without a replacement in the backend API;
// it still works.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace workload {

namespace {

namespace cg = cudnn_graph;

std::array<std::int64_t, 4> dims(at::IntArrayRef s) { return {s[0], s[1], s[2], s[3]}; }

/// The BN backward-weights node's outputs, in BnGrads' order: dweight, dbias, a, b, c.
constexpr std::array<const char*, 5> kBnBwdOutputs = {"dscale", "dbias", "eq_dy", "eq_x",
                                                      "eq_bias"};

/// Which graph a plan runs.
enum class Kind { kConvStats, kWgrad, kDgradDreluBn, kBnGrads, kDbnApply, kOutput, kDgradAdd };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kConvStats:
      return "convolution";
    case Kind::kWgrad:
      return "weight gradient";
    case Kind::kDgradDreluBn:
      return "data gradient through ReLU into the batch norm";
    case Kind::kBnGrads:
      return "batch norm's gradients";
    case Kind::kDbnApply:
      return "batch norm's data gradient";
    case Kind::kOutput:
      return "block's output";
    case Kind::kDgradAdd:
      return "input gradient with the shortcut's";
  }
  return "piece";
}

/// What makes two calls the same plan: the graph, the shapes, the geometry, the prologue.
using PlanKey = std::tuple<int, std::vector<std::int64_t>, std::vector<std::int64_t>,
                           std::vector<std::int64_t>, std::int64_t, std::int64_t, bool, int>;

/// A graph built once, its plan, and the uids its variant pack binds. `plan` is empty where no
/// engine took the graph (`why` says what cuDNN said).
struct CachedPlan {
  cg::Graph graph;
  std::vector<std::vector<cg::Desc>> configs;  // outlive the plan finalized from one
  std::unique_ptr<cg::Plan> plan;
  bool nondeterministic = false;  // the plan's engine is (no deterministic one built)
  std::string why;
  std::int64_t x = -1, w = -1, y = -1, sum = -1, sqsum = -1, scale = -1, bias = -1;
  std::map<std::string, std::int64_t> uid;  // the backward graphs' other tensors, by name
};

/// A per-channel fp32 vector [C] as the graphs bind it, [1, C, 1, 1].
at::Tensor bound(const at::Tensor& v) {
  return v.to(at::kFloat).reshape({1, -1, 1, 1}).contiguous();
}

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

/// The plan of `cfg` on `h`, or null where cuDNN refuses it (`why` then says what it said).
std::unique_ptr<cg::Plan> plan_of(cudnnHandle_t h, const cg::Desc& cfg, std::string& why) {
  auto plan =
      std::make_unique<cg::Plan>(cg::Plan{cg::Desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR), 0});
  try {
    plan->plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &h)
        .set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg)
        .finalize("execution plan");
    std::int64_t n = 0;
    cg::check(cudnnBackendGetAttribute(plan->plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                       CUDNN_TYPE_INT64, 1, &n, &plan->workspace),
              "plan workspace size");
  } catch (const cg::CudnnRefusal& e) {
    why = e.what();
    return nullptr;
  }
  return plan;
}

/// The first engine whose plan builds, in the heuristics' order (A, then the fallback), among the
/// engines cuDNN does not mark nondeterministic first; only where none of those builds does a
/// marked one run (`p.nondeterministic` says so). The mark does not cover the sums of the
/// statistics epilogue and the backward-weights node, which vary run to run on unmarked engines
/// too: SumOrder::kOrdered adds those again in a fixed order.
void plan_first_engine(cudnnHandle_t h, CachedPlan& p) {
  const cg::Desc g = p.graph.finalize(h);
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    try {
      p.configs.push_back(cg::engine_configs(g, mode, 8));
    } catch (const cg::CudnnRefusal& e) {
      p.why = e.what();
    }
  }
  for (const bool deterministic : {true, false}) {
    for (const std::vector<cg::Desc>& configs : p.configs) {
      for (const cg::Desc& cfg : configs) {
        try {
          if (cg::engine_of(cfg).nondeterministic == deterministic) continue;
        } catch (const cg::CudnnRefusal& e) {
          p.why = e.what();
          continue;
        }
        p.plan = plan_of(h, cfg, p.why);
        if (p.plan) {
          p.nondeterministic = !deterministic;
          return;
        }
      }
    }
  }
  if (p.why.empty()) p.why = "the heuristics offered no engine";
}

/// The prologue's scale and bias as the engines take them ([1, C, 1, 1] in x's dtype), bound to
/// `b`; the caller keeps them alive until the plan has run.
struct PrologueTensors {
  at::Tensor scale, bias;
};
PrologueTensors bind_prologue(const CachedPlan& p, const std::optional<Prologue>& prologue,
                              at::ScalarType dtype, cg::Bindings& b) {
  if (!prologue) return {};
  PrologueTensors t{prologue->scale.to(dtype).view({1, -1, 1, 1}).contiguous(),
                    prologue->bias.to(dtype).view({1, -1, 1, 1}).contiguous()};
  b.bind(p.scale, t.scale);
  b.bind(p.bias, t.bias);
  return t;
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
  explicit CudnnConvBnOps(SumOrder order) : order_(order) {}

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
    const PrologueTensors kept = bind_prologue(*p, prologue, x.scalar_type(), b);
    run(*p, b, x.options());
    if (order_ == SumOrder::kOrdered) return with_ordered_sums(std::move(out.y));
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
    const PrologueTensors kept = bind_prologue(*p, prologue, x.scalar_type(), b);
    run(*p, b, x.options());
    return dw;
  }

  // One kernel where the reference launches about twenty (bn_stats/); the reference where this
  // build has no nvcc or a vector is not an fp32 one of the device.
  BnFinal finalize(const torch::Tensor& sum, const torch::Tensor& sqsum, std::int64_t count,
                   const torch::Tensor& weight, const torch::Tensor& bias,
                   torch::Tensor& running_mean, torch::Tensor& running_var, double momentum,
                   double eps) const override {
#if defined(WORKLOAD_HAVE_BN_STATS_KERNELS)
    if (device_vectors(sum, {sum, sqsum, weight, bias, running_mean, running_var})) {
      // One allocation for the four outputs.
      const at::Tensor out = at::empty({4, sum.numel()}, sum.options());
      BnFinal f{out[0], out[1], out[2], out[3]};
      launch_bn_finalize(
          BnFinalizeArgs{sum.data_ptr<float>(), sqsum.data_ptr<float>(), weight.data_ptr<float>(),
                         bias.data_ptr<float>(), running_mean.data_ptr<float>(),
                         running_var.data_ptr<float>(), f.mean.data_ptr<float>(),
                         f.invstd.data_ptr<float>(), f.scale.data_ptr<float>(),
                         f.bias.data_ptr<float>(), sum.numel(), count, momentum, eps},
          at::cuda::getCurrentCUDAStream(sum.device().index()));
      return f;
    }
#endif
    return reference().finalize(sum, sqsum, count, weight, bias, running_mean, running_var,
                                momentum, eps);
  }
  // The plain data gradient: the reference's (LibTorch's cuDNN convolution).
  torch::Tensor dgrad(const torch::Tensor& dy, const torch::Tensor& w, ConvSpec spec,
                      at::IntArrayRef x_sizes) const override {
    return reference().dgrad(dy, w, spec, x_sizes);
  }
  // The add, and the ReLU's backward where given, in the data gradient's epilogue: one write of dx
  // where the reference writes the data gradient, then reads it and r and writes their sum (2.8 ms
  // a step at batch 256 on an H100), then reads that and relu_out and writes the masked sum (2.7).
  torch::Tensor dgrad_add(const torch::Tensor& dy, const torch::Tensor& w, ConvSpec spec,
                          const torch::Tensor& r, const torch::Tensor& relu_out) const override {
    const torch::Tensor wh = w.to(dy.scalar_type()).contiguous(at::MemoryFormat::ChannelsLast);
    const bool masked = relu_out.defined();
    if (!takes(dy) || !takes(r) || (masked && (!takes(relu_out) || relu_out.sizes() != r.sizes())))
      return reference().dgrad_add(dy, wh, spec, r, relu_out);
    const CachedPlan* p = plan_for(Kind::kDgradAdd, r.sizes(), w.sizes(), dy.sizes().vec(), spec,
                                   masked, r.options());
    if (p == nullptr) return reference().dgrad_add(dy, wh, spec, r, relu_out);
    at::Tensor dx = at::empty(r.sizes(), r.options(), at::MemoryFormat::ChannelsLast);
    cg::Bindings bind;
    bind.bind(p->w, wh);
    bind.bind(p->y, dy);
    bind.bind(p->uid.at("r"), r);
    if (masked) bind.bind(p->uid.at("relu_out"), relu_out);
    bind.bind(p->x, dx);
    run(*p, bind, r.options());
    return dx;
  }
  BnGrads dgrad_drelu_bn(const torch::Tensor& dy, const torch::Tensor& w, ConvSpec spec,
                         const torch::Tensor& x, const BnFinal& bn_final,
                         const torch::Tensor& weight) const override {
    const torch::Tensor wh = w.to(dy.scalar_type()).contiguous(at::MemoryFormat::ChannelsLast);
    if (!takes(x) || !takes(dy))
      return reference().dgrad_drelu_bn(dy, wh, spec, x, bn_final, weight);
    const CachedPlan* p = plan_for(Kind::kDgradDreluBn, x.sizes(), w.sizes(), dy.sizes().vec(),
                                   spec, false, x.options());
    if (p == nullptr) return reference().dgrad_drelu_bn(dy, wh, spec, x, bn_final, weight);
    // The pattern recomputes bn(x) from the batch statistics and the layer's own weight and bias.
    const at::Tensor beta = bound(bn_final.bias + bn_final.mean * bn_final.scale);
    cg::Bindings bind;
    bind.bind(p->w, wh);
    bind.bind(p->y, dy);
    bind.bind(p->uid.at("beta"), beta);
    const BnGrads g = run_bn_bwd_weights(*p, bind, x, at::empty_like(x), bn_final, weight);
    // The engine's dz (the same bits every run); its sums again in a fixed order.
    if (order_ == SumOrder::kOrdered) return reduced_bn_grads(g.dz, x, bn_final, weight);
    return g;
  }
  // One read of dz and x where the reference makes about six fp32 passes (the block's last BN
  // and its shortcut's): the ordered kernel where nvcc built it and it takes them (bn_stats/: the
  // same bits every run, at about 0.85 of an H100's memory rate), else cuDNN's backward-weights
  // node where an engine takes it alone (cuDNN 9.19's heuristics offered none on an H100 at batch
  // 256), else ATen's reduction.
  BnGrads bn_grads(const torch::Tensor& dz, const torch::Tensor& x, const BnFinal& bn_final,
                   const torch::Tensor& weight) const override {
#if defined(WORKLOAD_HAVE_BN_STATS_KERNELS)
    if (auto g = kernel_bn_grads(dz, {BnInput{x, bn_final, weight}})) return std::move((*g)[0]);
#endif
    if (!takes(x) || !takes(dz) || dz.sizes() != x.sizes()) {
      return reference().bn_grads(dz, x, bn_final, weight);
    }
    const CachedPlan* p =
        plan_for(Kind::kBnGrads, x.sizes(), {}, {}, ConvSpec{}, false, x.options());
    if (p == nullptr || order_ == SumOrder::kOrdered) {
      return reduced_bn_grads(dz, x, bn_final, weight);
    }
    cg::Bindings bind;
    return run_bn_bwd_weights(*p, bind, x, dz, bn_final, weight);
  }
  // Both BNs' sums in one read of dz by the ordered kernel where it takes them, else bn_grads of
  // each.
  std::pair<BnGrads, BnGrads> bn_grads_pair(const torch::Tensor& dz, const BnInput& first,
                                            const BnInput& second) const override {
#if defined(WORKLOAD_HAVE_BN_STATS_KERNELS)
    if (auto g = kernel_bn_grads(dz, {first, second})) {
      return {std::move((*g)[0]), std::move((*g)[1])};
    }
#endif
    return ConvBnOps::bn_grads_pair(dz, first, second);
  }
  torch::Tensor dbn_apply(const BnGrads& g, const torch::Tensor& x) const override {
    if (!takes(x) || !takes(g.dz)) return reference().dbn_apply(g, x);
    const CachedPlan* p =
        plan_for(Kind::kDbnApply, x.sizes(), {}, {}, ConvSpec{}, false, x.options());
    if (p == nullptr) return reference().dbn_apply(g, x);
    at::Tensor dx = at::empty_like(x);
    const at::Tensor a = bound(g.a), b = bound(g.b), c = bound(g.c);
    cg::Bindings bind;
    bind.bind(p->uid.at("dz"), g.dz);
    bind.bind(p->x, x);
    bind.bind(p->uid.at("a"), a);
    bind.bind(p->uid.at("b"), b);
    bind.bind(p->uid.at("c"), c);
    bind.bind(p->y, dx);
    run(*p, bind, x.options());
    return dx;
  }
  // One pass over y and the residual where the reference makes about ten in fp32 (the H100's
  // capture: the forward 8.5x the unfused one, mostly the reference's output).
  torch::Tensor output(const torch::Tensor& y, const BnFinal& bn, const torch::Tensor& r,
                       const BnFinal* res_bn) const override {
    if (!takes(y) || !takes(r) || r.sizes() != y.sizes()) {
      return reference().output(y, bn, r, res_bn);
    }
    const CachedPlan* p =
        plan_for(Kind::kOutput, y.sizes(), {}, {}, ConvSpec{}, res_bn != nullptr, y.options());
    if (p == nullptr) return reference().output(y, bn, r, res_bn);
    at::Tensor out = at::empty(y.sizes(), y.options(), at::MemoryFormat::ChannelsLast);
    const at::Tensor scale = bound(bn.scale), bias = bound(bn.bias);
    at::Tensor r_scale, r_bias;  // bound while the plan runs
    cg::Bindings bind;
    bind.bind(p->x, y);
    bind.bind(p->uid.at("r"), r);
    bind.bind(p->scale, scale);
    bind.bind(p->bias, bias);
    if (res_bn != nullptr) {
      r_scale = bound(res_bn->scale);
      r_bias = bound(res_bn->bias);
      bind.bind(p->uid.at("r_scale"), r_scale);
      bind.bind(p->uid.at("r_bias"), r_bias);
    }
    bind.bind(p->y, out);
    run(*p, bind, y.options());
    return out;
  }

 private:
  static const ConvBnOps& reference() { return reference_conv_bn_ops(); }

  /// y and its sums per channel added in a fixed order (SumOrder::kOrdered): one kernel pass over
  /// y where nvcc built it (bn_stats/), else the reference's fp32 sums (ATen's reductions).
  static ConvStats with_ordered_sums(at::Tensor y) {
#if defined(WORKLOAD_HAVE_BN_STATS_KERNELS)
    if (y.scalar_type() == at::kHalf && y.is_contiguous(at::MemoryFormat::ChannelsLast) &&
        y.size(1) % 2 == 0 && reinterpret_cast<std::uintptr_t>(y.data_ptr()) % 4 == 0) {
      const std::int64_t c = y.size(1), rows = y.numel() / c;
      const auto f = y.options().dtype(at::kFloat);
      const at::Tensor sums = at::empty({2, c}, f);
      const at::Tensor partial = at::empty({channel_sums_workspace(rows, c)}, f);
      launch_channel_sums(ChannelSumsArgs{y.data_ptr(), rows, c, sums[0].data_ptr<float>(),
                                          sums[1].data_ptr<float>(), partial.data_ptr<float>()},
                          at::cuda::getCurrentCUDAStream(y.device().index()));
      return {std::move(y), sums[0], sums[1]};
    }
#endif
    const at::Tensor yf = y.to(at::kFloat);
    return {std::move(y), yf.sum({0, 2, 3}), (yf * yf).sum({0, 2, 3})};
  }

  /// bn_grads in one reduction: dz and x read once, the sums in fp32. The ordered kernel's
  /// (bn_stats/) where nvcc built it and it takes the inputs, else ATen's
  /// batch_norm_backward_reduce (what SyncBatchNorm's backward runs).
  static BnGrads reduced_bn_grads(const at::Tensor& dz, const at::Tensor& x,
                                  const BnFinal& bn_final, const at::Tensor& weight) {
#if defined(WORKLOAD_HAVE_BN_STATS_KERNELS)
    if (auto g = kernel_bn_grads(dz, {BnInput{x, bn_final, weight}})) return std::move((*g)[0]);
#endif
    // An fp32 weight beside fp16 activations selects the kernels that read fp32 statistics.
    const at::Tensor wf = weight.to(at::kFloat).contiguous();
    const auto sums = at::batch_norm_backward_reduce(dz, x, bn_final.mean.contiguous(),
                                                     bn_final.invstd.contiguous(), wf,
                                                     /*input_g=*/false, /*weight_g=*/true,
                                                     /*bias_g=*/true);
    return coefficients(dz, std::get<2>(sums), std::get<3>(sums), bn_final, wf,
                        x.numel() / x.size(1));
  }

  /// bn_grads_from_sums: in one kernel where nvcc built it and the vectors are the GPU's fp32
  /// ones (the three coefficients then share one allocation), else in LibTorch's operations.
  static BnGrads coefficients(const at::Tensor& dz, const at::Tensor& dweight,
                              const at::Tensor& dbias, const BnFinal& bn_final,
                              const at::Tensor& weight, std::int64_t count) {
#if defined(WORKLOAD_HAVE_BN_STATS_KERNELS)
    const at::Tensor wf = weight.to(at::kFloat).contiguous();
    if (device_vectors(dweight, {dweight, dbias, bn_final.mean, bn_final.invstd, wf})) {
      const at::Tensor abc = at::empty({3, dweight.numel()}, dweight.options());
      BnGrads g{dz, dweight, dbias, abc[0], abc[1], abc[2]};
      launch_bn_grad_coefficients(
          BnGradCoefficientArgs{dweight.data_ptr<float>(), dbias.data_ptr<float>(),
                                bn_final.mean.data_ptr<float>(), bn_final.invstd.data_ptr<float>(),
                                wf.data_ptr<float>(), g.a.data_ptr<float>(), g.b.data_ptr<float>(),
                                g.c.data_ptr<float>(), dweight.numel(), count},
          at::cuda::getCurrentCUDAStream(dweight.device().index()));
      return g;
    }
#endif
    return bn_grads_from_sums(dz, dweight, dbias, bn_final, weight, count);
  }

#if defined(WORKLOAD_HAVE_BN_STATS_KERNELS)
  /// The gradients of one BN, or of two whose outputs were added (dz the gradient of both), from
  /// one read of dz and of each x by the ordered kernel (bn_stats/); none where it does not take
  /// the inputs: every tensor fp16, channels last and contiguous, of dz's sizes on its GPU, 4-byte
  /// aligned, with an even number of channels, and the statistics fp32 vectors there.
  static std::optional<std::vector<BnGrads>> kernel_bn_grads(const at::Tensor& dz,
                                                             const std::vector<BnInput>& bns) {
    const auto takes_rows = [&](const at::Tensor& t) {
      return t.is_cuda() && t.device() == dz.device() && t.scalar_type() == at::kHalf &&
             t.dim() == 4 && t.sizes() == dz.sizes() &&
             t.is_contiguous(at::MemoryFormat::ChannelsLast) &&
             reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 4 == 0;
    };
    if (!takes_rows(dz) || dz.size(1) % 2 != 0 || dz.size(1) == 0 || bns.empty() ||
        bns.size() > 2) {
      return std::nullopt;
    }
    const std::int64_t c = dz.size(1), rows = dz.numel() / c;
    const auto f = dz.options().dtype(at::kFloat);
    // Each BN's dweight and dbias; a row of it is what the statistics are checked against.
    const at::Tensor sums = at::empty({2 * static_cast<std::int64_t>(bns.size()), c}, f);
    for (const BnInput& bn : bns) {
      if (!takes_rows(bn.x) || !device_vectors(sums[0], {bn.stats.mean, bn.stats.invstd})) {
        return std::nullopt;
      }
    }
    const at::Tensor partial = at::empty({bn_backward_sums_workspace(rows, c)}, f);
    BnBackwardSumsArgs a{
        dz.data_ptr(), rows, c, static_cast<int>(bns.size()), {}, partial.data_ptr<float>()};
    for (std::size_t i = 0; i < bns.size(); ++i) {
      a.bn[i] = {bns[i].x.data_ptr(), bns[i].stats.mean.data_ptr<float>(),
                 bns[i].stats.invstd.data_ptr<float>(),
                 sums[static_cast<std::int64_t>(2 * i)].data_ptr<float>(),
                 sums[static_cast<std::int64_t>(2 * i + 1)].data_ptr<float>()};
    }
    launch_bn_backward_sums(a, at::cuda::getCurrentCUDAStream(dz.device().index()));
    std::vector<BnGrads> out;
    for (std::size_t i = 0; i < bns.size(); ++i) {
      out.push_back(coefficients(dz, sums[static_cast<std::int64_t>(2 * i)],
                                 sums[static_cast<std::int64_t>(2 * i + 1)], bns[i].stats,
                                 bns[i].weight, rows));
    }
    return out;
  }
#endif

  /// Whether every vector is a contiguous fp32 one of `like`'s length on `like`'s GPU: what the
  /// per-channel kernels (bn_stats/) read and write.
  static bool device_vectors(const at::Tensor& like, std::initializer_list<at::Tensor> vectors) {
    for (const at::Tensor& v : vectors) {
      if (!v.is_cuda() || v.device() != like.device() || v.scalar_type() != at::kFloat ||
          !v.is_contiguous() || v.numel() != like.numel()) {
        return false;
      }
    }
    return true;
  }

  /// Binds the BN backward-weights node's tensors (add_bn_bwd_tensors) to x, dz (an output where
  /// the graph writes it), the statistics and fresh outputs, beside what `bind` holds already;
  /// runs `p` and returns the BN's gradients.
  static BnGrads run_bn_bwd_weights(const CachedPlan& p, cg::Bindings& bind, const at::Tensor& x,
                                    const at::Tensor& dz, const BnFinal& bn_final,
                                    const at::Tensor& weight) {
    const at::Tensor mean = bound(bn_final.mean), invstd = bound(bn_final.invstd),
                     gamma = bound(weight);
    bind.bind(p.x, x);
    bind.bind(p.uid.at("dz"), dz);
    bind.bind(p.uid.at("mean"), mean);
    bind.bind(p.uid.at("invstd"), invstd);
    bind.bind(p.uid.at("gamma"), gamma);
    std::array<at::Tensor, kBnBwdOutputs.size()> out;
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i] = at::empty({1, x.size(1), 1, 1}, x.options().dtype(at::kFloat));
      bind.bind(p.uid.at(kBnBwdOutputs[i]), out[i]);
    }
    run(p, bind, x.options());
    return BnGrads{dz,
                   out[0].view({-1}),
                   out[1].view({-1}),
                   out[2].view({-1}),
                   out[3].view({-1}),
                   out[4].view({-1})};
  }

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
                     kind_name(kind), c10::str(x).c_str(), c10::str(w).c_str(), p->why.c_str());
      } else if (p->nondeterministic) {
        std::fprintf(stderr,
                     "notice: the fused bottleneck's %s of x %s, w %s runs on an engine cuDNN "
                     "marks nondeterministic (no deterministic one took it): two runs of the same "
                     "inputs may differ in the last bits\n",
                     kind_name(kind), c10::str(x).c_str(), c10::str(w).c_str());
      }
      it = plans_.emplace(key, std::move(p)).first;
    }
    return it->second->plan ? it->second.get() : nullptr;
  }

  static void build(CachedPlan& p, Kind kind, at::IntArrayRef x, at::IntArrayRef w,
                    const std::vector<std::int64_t>& y, ConvSpec spec, bool prologue,
                    cudnnDataType_t dt) {
    if (kind == Kind::kDgradDreluBn) {
      build_dgrad_drelu_bn(p, x, w, y, spec, dt);
    } else if (kind == Kind::kBnGrads) {
      build_bn_grads(p, x, dt);
    } else if (kind == Kind::kDbnApply) {
      build_dbn_apply(p, x, dt);
    } else if (kind == Kind::kOutput) {
      build_output(p, x, /*res_bn=*/prologue, dt);
    } else if (kind == Kind::kDgradAdd) {
      build_dgrad_add(p, x, w, y, spec, /*masked=*/prologue, dt);
    } else {
      build_conv(p, kind, x, w, y, spec, prologue, dt);
    }
    plan_first_engine(at::native::getCudnnHandle(), p);
  }

  static void build_conv(CachedPlan& p, Kind kind, at::IntArrayRef x, at::IntArrayRef w,
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
  }

  /// cuDNN's DgradDreluBNBwdWeight pattern: dgrad(dy, w); bn(x) recomputed as
  /// ((x - mean) * invstd) * gamma + beta in fp32; dReLU's output dz written (dBNApply reads it);
  /// the BN's weight gradients and its data gradient's coefficients from x and dz.
  static void build_dgrad_drelu_bn(CachedPlan& p, at::IntArrayRef x, at::IntArrayRef w,
                                   const std::vector<std::int64_t>& dy, ConvSpec spec,
                                   cudnnDataType_t dt) {
    cg::Graph& g = p.graph;
    add_bn_bwd_tensors(p, x, dt);
    p.w = g.tensor(dt, dims(w));
    p.y = g.tensor(dt, dims(dy));
    p.uid["beta"] = g.tensor(CUDNN_DATA_FLOAT, {1, x[1], 1, 1});
    const std::int64_t dconv = g.virtual_like(dims(x)), centred = g.virtual_like(dims(x)),
                       normed = g.virtual_like(dims(x)), scaled = g.virtual_like(dims(x)),
                       xbn = g.virtual_like(dims(x));
    g.conv(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
           cg::ConvGeometry{spec.pad, spec.stride}, dconv, p.w, p.y);
    g.pointwise(CUDNN_POINTWISE_ADD, p.x, p.uid["mean"], centred, /*alpha2=*/-1.0f);
    g.pointwise(CUDNN_POINTWISE_MUL, centred, p.uid["invstd"], normed);
    g.pointwise(CUDNN_POINTWISE_MUL, normed, p.uid["gamma"], scaled);
    g.pointwise(CUDNN_POINTWISE_ADD, scaled, p.uid["beta"], xbn);
    g.pointwise(CUDNN_POINTWISE_RELU_BWD, xbn, dconv, p.uid["dz"]);
    add_bn_bwd_weights(p);
  }

  /// dx = dgrad(dy, w) + r: the data gradient in fp32, r added in its epilogue, then where
  /// `masked` zero where relu_out is not positive (ReLU's backward); dx in r's dtype.
  static void build_dgrad_add(CachedPlan& p, at::IntArrayRef x, at::IntArrayRef w,
                              const std::vector<std::int64_t>& dy, ConvSpec spec, bool masked,
                              cudnnDataType_t dt) {
    cg::Graph& g = p.graph;
    p.w = g.tensor(dt, dims(w));
    p.y = g.tensor(dt, dims(dy));
    p.uid["r"] = g.tensor(dt, dims(x));
    p.x = g.tensor(dt, dims(x));
    const std::int64_t dconv = g.virtual_like(dims(x));
    g.conv(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
           cg::ConvGeometry{spec.pad, spec.stride}, dconv, p.w, p.y);
    if (!masked) {
      g.pointwise(CUDNN_POINTWISE_ADD, dconv, p.uid["r"], p.x);
      return;
    }
    p.uid["relu_out"] = g.tensor(dt, dims(x));
    const std::int64_t sum = g.virtual_like(dims(x));
    g.pointwise(CUDNN_POINTWISE_ADD, dconv, p.uid["r"], sum);
    g.pointwise(CUDNN_POINTWISE_RELU_BWD, p.uid["relu_out"], sum, p.x);
  }

  /// The BN's weight gradients and its data gradient's coefficients from its input x and the
  /// gradient of its output dz: the backward-weights node of DgradDreluBNBwdWeight, alone.
  static void build_bn_grads(CachedPlan& p, at::IntArrayRef x, cudnnDataType_t dt) {
    add_bn_bwd_tensors(p, x, dt);
    add_bn_bwd_weights(p);
  }

  /// The BN backward-weights node's tensors: its input x and dz in x's dtype, its statistics
  /// (mean, invstd, gamma) and its outputs (kBnBwdOutputs) fp32 per channel.
  static void add_bn_bwd_tensors(CachedPlan& p, at::IntArrayRef x, cudnnDataType_t dt) {
    cg::Graph& g = p.graph;
    p.x = g.tensor(dt, dims(x));
    p.uid["dz"] = g.tensor(dt, dims(x));
    const std::array<std::int64_t, 4> pc = {1, x[1], 1, 1};
    for (const char* name : {"mean", "invstd", "gamma"})
      p.uid[name] = g.tensor(CUDNN_DATA_FLOAT, pc);
    for (const char* name : kBnBwdOutputs) p.uid[name] = g.tensor(CUDNN_DATA_FLOAT, pc);
  }

  /// The node itself, after whatever writes dz.
  static void add_bn_bwd_weights(CachedPlan& p) {
    p.graph.bn_bwd_weights(p.x, p.uid["dz"], p.uid["mean"], p.uid["invstd"], p.uid["gamma"],
                           p.uid["dscale"], p.uid["dbias"], p.uid["eq_dy"], p.uid["eq_x"],
                           p.uid["eq_bias"]);
  }

  /// dBNApply: dx = a * dz + b * x + c per channel, in x's dtype.
  static void build_dbn_apply(CachedPlan& p, at::IntArrayRef x, cudnnDataType_t dt) {
    cg::Graph& g = p.graph;
    const std::array<std::int64_t, 4> pc = {1, x[1], 1, 1};
    p.uid["dz"] = g.tensor(dt, dims(x));
    p.x = g.tensor(dt, dims(x));
    for (const char* name : {"a", "b", "c"}) p.uid[name] = g.tensor(CUDNN_DATA_FLOAT, pc);
    p.y = g.tensor(dt, dims(x));
    const std::int64_t t1 = g.virtual_like(dims(x)), t2 = g.virtual_like(dims(x)),
                       t3 = g.virtual_like(dims(x));
    g.pointwise(CUDNN_POINTWISE_MUL, p.uid["dz"], p.uid["a"], t1);
    g.pointwise(CUDNN_POINTWISE_MUL, p.x, p.uid["b"], t2);
    g.pointwise(CUDNN_POINTWISE_ADD, t1, t2, t3);
    g.pointwise(CUDNN_POINTWISE_ADD, t3, p.uid["c"], p.y);
  }

  /// The block's output: relu(y * scale + bias + residual), the residual either as given or
  /// through its own BN (r * r_scale + r_bias), per-channel fp32 factors, y's dtype in and out.
  static void build_output(CachedPlan& p, at::IntArrayRef y, bool res_bn, cudnnDataType_t dt) {
    cg::Graph& g = p.graph;
    const std::array<std::int64_t, 4> pc = {1, y[1], 1, 1};
    p.x = g.tensor(dt, dims(y));
    p.uid["r"] = g.tensor(dt, dims(y));
    p.scale = g.tensor(CUDNN_DATA_FLOAT, pc);
    p.bias = g.tensor(CUDNN_DATA_FLOAT, pc);
    p.y = g.tensor(dt, dims(y));
    const std::int64_t scaled = g.virtual_like(dims(y)), normed = g.virtual_like(dims(y)),
                       sum = g.virtual_like(dims(y));
    g.pointwise(CUDNN_POINTWISE_MUL, p.x, p.scale, scaled);
    g.pointwise(CUDNN_POINTWISE_ADD, scaled, p.bias, normed);
    std::int64_t residual = p.uid["r"];
    if (res_bn) {
      p.uid["r_scale"] = g.tensor(CUDNN_DATA_FLOAT, pc);
      p.uid["r_bias"] = g.tensor(CUDNN_DATA_FLOAT, pc);
      const std::int64_t r_scaled = g.virtual_like(dims(y)), r_normed = g.virtual_like(dims(y));
      g.pointwise(CUDNN_POINTWISE_MUL, residual, p.uid["r_scale"], r_scaled);
      g.pointwise(CUDNN_POINTWISE_ADD, r_scaled, p.uid["r_bias"], r_normed);
      residual = r_normed;
    }
    g.pointwise(CUDNN_POINTWISE_ADD, normed, residual, sum);
    g.pointwise(CUDNN_POINTWISE_RELU_FWD, sum, -1, p.y);
  }

  const SumOrder order_;
  mutable std::mutex mutex_;  // the training thread's forward, autograd's thread's backward
  mutable std::map<PlanKey, std::unique_ptr<CachedPlan>> plans_;
};

}  // namespace

const ConvBnOps* cudnn_conv_bn_ops(SumOrder order) {
  // Never destroyed: their plans hold cuDNN descriptors, and a static's destructor would free them
  // after the CUDA context and cuDNN are gone at the program's exit (resnet50_test ended in a
  // segmentation fault after its last case passed). LibTorch keeps its cuDNN handles the same way.
  static const auto* const kEngines = new CudnnConvBnOps(SumOrder::kEngines);
  static const auto* const kOrdered = new CudnnConvBnOps(SumOrder::kOrdered);
  return order == SumOrder::kOrdered ? kOrdered : kEngines;
}

}  // namespace workload
