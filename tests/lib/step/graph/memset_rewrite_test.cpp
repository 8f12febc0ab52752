// Tests of rewrite_memsets (lib/step/graph): a graph's small memset nodes become kernel nodes that
// write the same bytes in the same order (element sizes 1, 2 and 4, pitched rows, unaligned
// addresses), larger ones stay, the dependencies carry over, and captured cudaMemsetAsync calls are
// rewritten too. Built only in CUDA builds with a CUDA compiler; each test skips without a GPU.
#include "lib/step/graph/memset_rewrite.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <type_traits>
#include <vector>

namespace workload {
namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device"

#define CHECK_CUDA(call)                                                                   \
  do {                                                                                     \
    const cudaError_t check_err_ = (call);                                                 \
    ASSERT_EQ(check_err_, cudaSuccess) << #call << ": " << cudaGetErrorString(check_err_); \
  } while (0)

struct DeviceFree {
  void operator()(void* p) const noexcept { (void)cudaFree(p); }
};
using DeviceBuffer = std::unique_ptr<unsigned char, DeviceFree>;
DeviceBuffer device_buffer(std::size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
  return DeviceBuffer(static_cast<unsigned char*>(p));
}
struct GraphDestroy {
  void operator()(cudaGraph_t g) const noexcept { (void)cudaGraphDestroy(g); }
};
using Graph = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDestroy>;
struct ExecDestroy {
  void operator()(cudaGraphExec_t g) const noexcept { (void)cudaGraphExecDestroy(g); }
};
using GraphExec = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, ExecDestroy>;

// How many nodes of each type the graph holds.
std::map<cudaGraphNodeType, int> census(cudaGraph_t g) {
  std::size_t n = 0;
  EXPECT_EQ(cudaGraphGetNodes(g, nullptr, &n), cudaSuccess);
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0) {
    EXPECT_EQ(cudaGraphGetNodes(g, nodes.data(), &n), cudaSuccess);
  }
  std::map<cudaGraphNodeType, int> out;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t{};
    EXPECT_EQ(cudaGraphNodeGetType(node, &t), cudaSuccess);
    ++out[t];
  }
  return out;
}

std::size_t dependencies(cudaGraphNode_t node) {
  std::size_t n = 0;
#if CUDART_VERSION >= 13000
  EXPECT_EQ(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &n), cudaSuccess);
#else
  EXPECT_EQ(cudaGraphNodeGetDependencies(node, nullptr, &n), cudaSuccess);
#endif
  return n;
}

std::size_t edges(cudaGraph_t g) {
  std::size_t n = 0;
#if CUDART_VERSION >= 13000
  EXPECT_EQ(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &n), cudaSuccess);
#else
  EXPECT_EQ(cudaGraphGetEdges(g, nullptr, nullptr, &n), cudaSuccess);
#endif
  return n;
}

// Instantiates and runs `g` once on a fresh stream, waiting for it.
void run_graph(cudaGraph_t g) {
  cudaGraphExec_t raw = nullptr;
  CHECK_CUDA(cudaGraphInstantiate(&raw, g, 0));
  GraphExec exec(raw);
  cudaStream_t s = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK_CUDA(cudaGraphLaunch(exec.get(), s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  CHECK_CUDA(cudaStreamDestroy(s));
}

cudaGraphNode_t add_memset(cudaGraph_t g, const cudaGraphNode_t* dep, void* dst, std::size_t pitch,
                           unsigned value, unsigned element_size, std::size_t width,
                           std::size_t height) {
  cudaMemsetParams m{};
  m.dst = dst;
  m.pitch = pitch;
  m.value = value;
  m.elementSize = element_size;
  m.width = width;
  m.height = height;
  cudaGraphNode_t node = nullptr;
  EXPECT_EQ(cudaGraphAddMemsetNode(&node, g, dep, dep ? 1 : 0, &m), cudaSuccess);
  return node;
}

void put(std::vector<unsigned char>& host, std::size_t at, std::uint32_t value, unsigned size) {
  std::memcpy(host.data() + at, &value, size);  // little-endian, as the device
}

TEST(MemsetRewriteTest, RewrittenGraphWritesWhatTheMemsetsWrote) {
  REQUIRE_GPU();
  constexpr std::size_t kBytes = 4096;
  DeviceBuffer buf = device_buffer(kBytes), out = device_buffer(kBytes), big = device_buffer(8192);
  ASSERT_TRUE(buf && out && big);
  CHECK_CUDA(cudaMemset(buf.get(), 0, kBytes));
  CHECK_CUDA(cudaMemset(out.get(), 0, kBytes));
  cudaGraph_t raw = nullptr;
  CHECK_CUDA(cudaGraphCreate(&raw, 0));
  Graph g(raw);
  // A chain: each write overwrites part of the one before it, so an order other than the
  // dependencies' would show; the copy reads the result.
  const cudaGraphNode_t a = add_memset(g.get(), nullptr, buf.get(), 0, 0x11223344u, 4, 1024, 1);
  const cudaGraphNode_t b = add_memset(g.get(), &a, buf.get() + 512, 256, 0xBEEFu, 2, 16, 4);
  const cudaGraphNode_t c = add_memset(g.get(), &b, buf.get() + 3001, 0, 0x7Fu, 1, 10, 1);
  cudaGraphNode_t copy = nullptr;
  CHECK_CUDA(cudaGraphAddMemcpyNode1D(&copy, g.get(), &c, 1, out.get(), buf.get(), kBytes,
                                      cudaMemcpyDeviceToDevice));
  add_memset(g.get(), nullptr, big.get(), 0, 0x5Au, 1, 8192, 1);  // above the limit below

  const MemsetRewrite r = rewrite_memsets(g.get(), /*max_bytes=*/kBytes);
  EXPECT_EQ(r.kernels, 3);
  EXPECT_EQ(r.kept, 1);
  EXPECT_EQ(r.kernel_bytes, 4096 + 16 * 2 * 4 + 10);
  std::map<cudaGraphNodeType, int> types = census(g.get());
  EXPECT_EQ(types[cudaGraphNodeTypeKernel], 3);
  EXPECT_EQ(types[cudaGraphNodeTypeMemset], 1);
  EXPECT_EQ(types[cudaGraphNodeTypeMemcpy], 1);
  // The chain survives: three edges, the copy still after the last write.
  EXPECT_EQ(edges(g.get()), 3u);
  EXPECT_EQ(dependencies(copy), 1u);

  std::vector<unsigned char> want(kBytes);
  for (std::size_t i = 0; i < kBytes; i += 4) put(want, i, 0x11223344u, 4);
  for (std::size_t row = 0; row < 4; ++row) {
    for (std::size_t col = 0; col < 16; ++col) put(want, 512 + row * 256 + col * 2, 0xBEEF, 2);
  }
  for (std::size_t i = 0; i < 10; ++i) want[3001 + i] = 0x7F;
  for (int round = 0; round < 2; ++round) {
    CHECK_CUDA(cudaMemset(buf.get(), 0xFF, kBytes));  // the graph must write it all again
    run_graph(g.get());
    std::vector<unsigned char> got(kBytes), got_big(8192);
    CHECK_CUDA(cudaMemcpy(got.data(), out.get(), kBytes, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(got_big.data(), big.get(), 8192, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < kBytes; ++i) {
      ASSERT_EQ(got[i], want[i]) << "byte " << i << ", round " << round;
    }
    for (std::size_t i = 0; i < 8192; ++i) ASSERT_EQ(got_big[i], 0x5A) << "byte " << i;
  }
}

// What cuDNN does: cudaMemsetAsync on a capturing stream, between other work.
TEST(MemsetRewriteTest, CapturedMemsetsBecomeKernels) {
  REQUIRE_GPU();
  for (const std::size_t limit : {kMaxRewrittenMemsetBytes, std::size_t{0}}) {
    DeviceBuffer buf = device_buffer(256), out = device_buffer(256);
    ASSERT_TRUE(buf && out);
    CHECK_CUDA(cudaMemset(buf.get(), 0, 256));
    cudaStream_t s = nullptr;
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CHECK_CUDA(cudaMemsetAsync(buf.get(), 0xAB, 100, s));
    CHECK_CUDA(cudaMemsetAsync(buf.get() + 50, 0xCD, 20, s));
    CHECK_CUDA(cudaMemcpyAsync(out.get(), buf.get(), 256, cudaMemcpyDeviceToDevice, s));
    cudaGraph_t raw = nullptr;
    CHECK_CUDA(cudaStreamEndCapture(s, &raw));
    CHECK_CUDA(cudaStreamDestroy(s));
    Graph g(raw);
    const MemsetRewrite r = rewrite_memsets(g.get(), limit);
    const bool rewritten = limit > 0;
    EXPECT_EQ(r.kernels, rewritten ? 2 : 0) << "limit " << limit;
    EXPECT_EQ(r.kept, rewritten ? 0 : 2) << "limit " << limit;
    EXPECT_EQ(census(g.get())[cudaGraphNodeTypeMemset], rewritten ? 0 : 2) << "limit " << limit;
    CHECK_CUDA(cudaMemset(buf.get(), 0, 256));
    run_graph(g.get());
    std::vector<unsigned char> got(256);
    CHECK_CUDA(cudaMemcpy(got.data(), out.get(), 256, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < 256; ++i) {
      const unsigned char want = i >= 50 && i < 70 ? 0xCD : (i < 100 ? 0xAB : 0);
      ASSERT_EQ(got[i], want) << "byte " << i << ", limit " << limit;
    }
  }
}

TEST(MemsetRewriteTest, GraphWithoutMemsetsIsLeftAlone) {
  REQUIRE_GPU();
  DeviceBuffer a = device_buffer(64), b = device_buffer(64);
  ASSERT_TRUE(a && b);
  cudaGraph_t raw = nullptr;
  CHECK_CUDA(cudaGraphCreate(&raw, 0));
  Graph g(raw);
  cudaGraphNode_t copy = nullptr;
  CHECK_CUDA(cudaGraphAddMemcpyNode1D(&copy, g.get(), nullptr, 0, b.get(), a.get(), 64,
                                      cudaMemcpyDeviceToDevice));
  const MemsetRewrite r = rewrite_memsets(g.get());
  EXPECT_EQ(r.kernels, 0);
  EXPECT_EQ(r.kept, 0);
  EXPECT_EQ(r.kernel_bytes, 0);
  EXPECT_EQ(census(g.get()), (std::map<cudaGraphNodeType, int>{{cudaGraphNodeTypeMemcpy, 1}}));
}

}  // namespace
}  // namespace workload
