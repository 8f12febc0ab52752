// Tests for cuDNN's graph API as lib/model/cudnn_graph/backend.h owns it: the types it maps, the
// refusal it raises with cuDNN's reason, a graph it refuses at build time, and on a GPU a plain
// forward convolution planned from the heuristics' engines against LibTorch's, and the engines'
// notes read from their configurations.
#include "lib/model/cudnn_graph/backend.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <set>
#include <string>
#include <utility>

namespace workload::cudnn_graph {
namespace {

TEST(CudnnGraphBackendTest, TheTypesItMapsAndTheOnesItRefuses) {
  EXPECT_EQ(cudnn_type(at::kHalf), CUDNN_DATA_HALF);
  EXPECT_EQ(cudnn_type(at::kBFloat16), CUDNN_DATA_BFLOAT16);
  EXPECT_EQ(cudnn_type(at::kFloat), CUDNN_DATA_FLOAT);
  EXPECT_THROW(cudnn_type(at::kLong), std::invalid_argument);
}

TEST(CudnnGraphBackendTest, ARefusalNamesTheCallAndCuDnnsStatus) {
  EXPECT_NO_THROW(check(CUDNN_STATUS_SUCCESS, "nothing"));
  try {
    check(CUDNN_STATUS_BAD_PARAM, "the test's call");
    FAIL() << "no refusal";
  } catch (const CudnnRefusal& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the test's call: "), std::string::npos) << what;
    EXPECT_NE(what.find(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM)), std::string::npos) << what;
  }
}

class CudnnGraphGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
    check(cudnnCreate(&handle_), "cudnnCreate");
  }
  void TearDown() override {
    if (handle_ != nullptr) cudnnDestroy(handle_);
  }
  /// A forward convolution x [n, c, hw, hw] * w [k, c, 3, 3] -> y (fp16, NHWC, padding 1): the
  /// finalized graph, with the descriptors it refers to (kept alive beside it), and the uids.
  struct ConvGraph {
    Graph ops;
    Desc graph;
    std::int64_t x, w, y;
  };
  ConvGraph plain_conv(std::int64_t n, std::int64_t c, std::int64_t k, std::int64_t hw) const {
    Graph g;
    const std::int64_t xi = g.tensor(CUDNN_DATA_HALF, {n, c, hw, hw}),
                       wi = g.tensor(CUDNN_DATA_HALF, {k, c, 3, 3}),
                       yi = g.tensor(CUDNN_DATA_HALF, {n, k, hw, hw});
    g.conv(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, ConvGeometry{1, 1}, xi, wi, yi);
    Desc graph = g.finalize(handle_);
    return {std::move(g), std::move(graph), xi, wi, yi};
  }
  cudnnHandle_t handle_ = nullptr;
};

// A descriptor finalized without what it needs is refused, saying which one.
TEST_F(CudnnGraphGpuTest, AnIncompleteDescriptorIsRefusedNamingIt) {
  Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  try {
    t.finalize("a tensor without dimensions");
    FAIL() << "finalized";
  } catch (const CudnnRefusal& e) {
    EXPECT_NE(std::string(e.what()).find("a tensor without dimensions"), std::string::npos);
  }
}

// x (fp16, NHWC) * w -> y through the first engine that builds: LibTorch's FP32 convolution of the
// same rounded values, within fp16's rounding.
TEST_F(CudnnGraphGpuTest, APlainConvolutionRunsAsLibTorchsOne) {
  at::manual_seed(3);
  const auto o = at::TensorOptions().device(at::kCUDA).dtype(at::kHalf);
  const at::Tensor x = at::randn({4, 32, 8, 8}, o).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor w = at::randn({16, 32, 3, 3}, o).contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor y = at::empty({4, 16, 8, 8}, o).contiguous(at::MemoryFormat::ChannelsLast);
  const ConvGraph conv = plain_conv(4, 32, 16, 8);
  std::vector<Desc> cfgs = engine_configs(conv.graph, CUDNN_HEUR_MODE_A, 4);
  ASSERT_FALSE(cfgs.empty()) << "heuristics offered no engine for a plain convolution";
  EXPECT_GE(engine_of(cfgs.front()).global_index, 0);
  bool ran = false;
  for (const Desc& cfg : cfgs) {
    Plan plan{Desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR), 0};
    try {
      plan.plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle_)
          .set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg)
          .finalize("execution plan");
    } catch (const CudnnRefusal&) {
      continue;  // the next engine
    }
    std::int64_t n = 0;
    check(cudnnBackendGetAttribute(plan.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                   CUDNN_TYPE_INT64, 1, &n, &plan.workspace),
          "workspace size");
    const at::Tensor ws =
        plan.workspace > 0 ? at::empty({plan.workspace}, o.dtype(at::kByte)) : at::Tensor();
    Bindings b;
    b.bind(conv.x, x);
    b.bind(conv.w, w);
    b.bind(conv.y, y);
    check(cudnnSetStream(handle_, nullptr), "cudnnSetStream");
    execute(handle_, plan, variant_pack(b, ws));
    ran = true;
    break;
  }
  ASSERT_TRUE(ran) << "no engine built";
  at::globalContext().setAllowTF32CuDNN(false);
  const at::Tensor ref = at::conv2d(x.to(at::kFloat), w.to(at::kFloat), {}, 1, 1);
  const double err = (y.to(at::kFloat) - ref).norm().item<double>() / ref.norm().item<double>();
  EXPECT_LT(err, 5e-3);
}

// The heuristics (A and the fallback, as the probe asks) offer a plain fp16 convolution both
// precompiled engines and the runtime-compiled one (fusion probe, docs/BENCHMARKS.md: 62, 1, 28, 0
// and 71 rtc for ResNet-50's 56x56x64 3x3), and engine_of tells them apart by their behaviour
// notes, and each configuration by its index.
TEST_F(CudnnGraphGpuTest, TheNotesTellARuntimeCompiledEngineFromAPrecompiledOne) {
  const ConvGraph conv = plain_conv(4, 64, 64, 56);
  std::set<std::int64_t> indices, compiled, precompiled;
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    std::vector<Desc> cfgs;
    try {
      cfgs = engine_configs(conv.graph, mode, 16);
    } catch (const CudnnRefusal&) {
      continue;  // a mode with no engine for it; the other may have them
    }
    for (const Desc& cfg : cfgs) {
      const EngineInfo info = engine_of(cfg);
      indices.insert(info.global_index);
      (info.runtime_compiled ? compiled : precompiled).insert(info.global_index);
    }
  }
  EXPECT_GT(indices.size(), 1U) << "every configuration read as the same engine";
  EXPECT_FALSE(precompiled.empty()) << "every engine read as runtime-compiled";
  EXPECT_FALSE(compiled.empty()) << "no engine read as runtime-compiled";
}

}  // namespace
}  // namespace workload::cudnn_graph
