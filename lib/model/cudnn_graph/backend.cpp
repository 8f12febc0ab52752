// cuDNN's graph (backend) API, owned and checked (lib/model/cudnn_graph/backend.h).
#include "lib/model/cudnn_graph/backend.h"

#include <algorithm>
#include <string>

// The operation graph's and the plan's handle attributes are deprecated in cuDNN 9.x without a
// replacement in the backend API; they still work.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace workload::cudnn_graph {

void check(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  std::array<char, 1024> last{};
  cudnnGetLastErrorString(last.data(), last.size());
  std::string msg = std::string(what) + ": " + cudnnGetErrorString(s);
  if (last[0] != '\0') msg += " (" + std::string(last.data()) + ")";
  throw CudnnRefusal(msg);
}

cudnnDataType_t cudnn_type(at::ScalarType t) {
  switch (t) {
    case at::kHalf:
      return CUDNN_DATA_HALF;
    case at::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    case at::kFloat:
      return CUDNN_DATA_FLOAT;
    default:
      throw std::invalid_argument("cudnn_graph: no cuDNN type for this tensor");
  }
}

std::int64_t Graph::tensor(cudnnDataType_t type, std::array<std::int64_t, 4> d, bool is_virtual,
                           bool by_value) {
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

std::int64_t Graph::virtual_like(std::array<std::int64_t, 4> d) {
  return tensor(CUDNN_DATA_FLOAT, d, /*is_virtual=*/true);
}

void Graph::conv(cudnnBackendDescriptorType_t op_type, const ConvGeometry& s, std::int64_t x,
                 std::int64_t w, std::int64_t y) {
  const std::int64_t dims = 2;
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const std::array<std::int64_t, 2> pad = {s.pad, s.pad}, stride = {s.stride, s.stride},
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

void Graph::pointwise(cudnnPointwiseMode_t mode, std::int64_t x, std::int64_t b, std::int64_t y,
                      float alpha2) {
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

void Graph::genstats(std::int64_t x, std::int64_t sum, std::int64_t sqsum) {
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

void Graph::bn_bwd_weights(std::int64_t x, std::int64_t dy, std::int64_t mean, std::int64_t invstd,
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

void Graph::bn_finalize(const std::array<std::int64_t, 15>& u) {
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

Desc Graph::finalize(cudnnHandle_t h) const {
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

namespace {

/// Whether engine `e`'s notes of one kind (behaviour or numerical: `attr`, `type`, up to `Count`
/// of enum `Note`) include `wanted`. A list cuDNN does not report reads as empty.
template <typename Note, std::size_t Count>
bool has_note(cudnnBackendDescriptor_t e, cudnnBackendAttributeName_t attr,
              cudnnBackendAttributeType_t type, Note wanted) {
  std::array<Note, Count> notes{};
  std::int64_t count = 0;
  if (cudnnBackendGetAttribute(e, attr, type, static_cast<std::int64_t>(Count), &count,
                               notes.data()) != CUDNN_STATUS_SUCCESS) {
    return false;
  }
  const auto end =
      notes.begin() + std::clamp<std::int64_t>(count, 0, static_cast<std::int64_t>(Count));
  return std::find(notes.begin(), end, wanted) != end;
}

}  // namespace

/// The engine of a configuration and its notes.
EngineInfo engine_of(const Desc& cfg) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = engine.get();
  std::int64_t n = 0;
  check(cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e),
        "engine of a configuration");
  EngineInfo info;
  check(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                 &info.global_index),
        "engine global index");
  // A note cuDNN does not report reads as absent: the engine is taken as neither.
  info.runtime_compiled = has_note<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT>(
      e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
      CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION);
  info.nondeterministic = has_note<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT>(
      e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
      CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
  return info;
}

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

}  // namespace workload::cudnn_graph
