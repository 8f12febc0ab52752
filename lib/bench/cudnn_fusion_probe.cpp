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
#include "lib/model/cudnn_graph/backend.h"

// The plan's handle attribute is deprecated in cuDNN 9.x without a replacement in the backend
// API; it still works.
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

using cudnn_graph::Bindings;
using cudnn_graph::check;
using cudnn_graph::cudnn_type;
using cudnn_graph::CudnnRefusal;
using cudnn_graph::Desc;
using cudnn_graph::engine_configs;
using cudnn_graph::engine_of;
using cudnn_graph::execute;
using cudnn_graph::Graph;
using cudnn_graph::Plan;
using cudnn_graph::variant_pack;

/// The convolution of a probe's shape, as the graph takes it.
cudnn_graph::ConvGeometry geometry(const ConvShape& s) { return {s.pad(), s.stride}; }

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
  }
}

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
      row.engines.push_back({-1, false, false, name, false, e.what(), 0, 0});
      continue;
    }
    for (const Desc& cfg : configs.back()) {
      EngineTry t;
      t.heuristics = name;
      try {
        const cudnn_graph::EngineInfo info = engine_of(cfg);
        t.global_index = info.global_index;
        t.runtime_compiled = info.runtime_compiled;
        t.nondeterministic = info.nondeterministic;
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
  g.conv(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, geometry(s), conv_in, w, yid);
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
  g.conv(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, geometry(s), conv_in, dwid,
         dy);
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
  g.conv(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, geometry(s), dxid, w, dy);
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
  g.conv(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, geometry(s), dconv, w, dy);
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
                              {"nondeterministic", e.nondeterministic},
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

/// "2, 3 rtc nd (not built)": the engines a row tried; build_ms: the fastest one's build time.
std::string engines_text(const ProbeRow& r, double* build_ms) {
  std::string engines;
  for (const EngineTry& e : r.engines) {
    if (e.global_index < 0) continue;
    if (!engines.empty()) engines += ", ";
    engines += std::to_string(e.global_index) + (e.runtime_compiled ? " rtc" : "") +
               (e.nondeterministic ? " nd" : "") + (e.built ? "" : " (not built)");
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
       "runtime-compiled; nd: nondeterministic) | best µs | vs plain | build ms (best) | errors "
       "against FP32 |\n"
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
