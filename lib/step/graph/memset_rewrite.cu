// Memset nodes of a captured graph become kernel nodes: the kernel and the graph surgery.
#include "lib/step/graph/memset_rewrite.h"

#include <algorithm>
#include <vector>

#include "common/cuda_check.h"

namespace workload {
namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kMaxBlocks = 1024;

// cudaMemsetParams' semantics: `height` rows `pitch` bytes apart, each of `width` elements of
// `element_size` bytes (1, 2 or 4) set to the low bytes of `value`. One thread per element.
__global__ void graph_memset(unsigned char* dst, std::size_t pitch, unsigned value,
                             unsigned element_size, std::size_t width, std::size_t height) {
  const std::size_t n = width * height;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned char* p = dst + (i / width) * pitch + (i % width) * element_size;
    if (element_size == 1) {
      *p = static_cast<unsigned char>(value);
    } else if (element_size == 2) {
      *reinterpret_cast<unsigned short*>(p) = static_cast<unsigned short>(value);
    } else {
      *reinterpret_cast<unsigned*>(p) = value;
    }
  }
}

// Into `out`, a node's dependencies (`incoming`) or its dependents, and true, when every such edge
// is a full-completion one; false when one is of another kind (programmatic): the node then stays.
bool plain_edges(cudaGraphNode_t node, bool incoming, std::vector<cudaGraphNode_t>& out) {
  std::size_t n = 0;
#if CUDART_VERSION >= 13000
  // CUDA 13 reports each edge's data; null data asks for full-completion edges only and answers
  // cudaErrorLossyQuery when there is another kind.
  auto query = [&](cudaGraphNode_t* nodes) {
    return incoming ? cudaGraphNodeGetDependencies(node, nodes, nullptr, &n)
                    : cudaGraphNodeGetDependentNodes(node, nodes, nullptr, &n);
  };
#else
  auto query = [&](cudaGraphNode_t* nodes) {
    return incoming ? cudaGraphNodeGetDependencies(node, nodes, &n)
                    : cudaGraphNodeGetDependentNodes(node, nodes, &n);
  };
#endif
  cudaError_t err = query(nullptr);
  if (err == cudaErrorLossyQuery) {
    (void)cudaGetLastError();
    return false;
  }
  WORKLOAD_CUDA_CHECK(err);
  out.resize(n);
  if (n == 0) return true;
  err = query(out.data());
  if (err == cudaErrorLossyQuery) {
    (void)cudaGetLastError();
    return false;
  }
  WORKLOAD_CUDA_CHECK(err);
  out.resize(n);
  return true;
}

void add_edge(cudaGraph_t graph, cudaGraphNode_t from, cudaGraphNode_t to) {
#if CUDART_VERSION >= 13000
  WORKLOAD_CUDA_CHECK(cudaGraphAddDependencies(graph, &from, &to, nullptr, 1));
#else
  WORKLOAD_CUDA_CHECK(cudaGraphAddDependencies(graph, &from, &to, 1));
#endif
}

}  // namespace

MemsetRewrite rewrite_memsets(cudaGraph_t graph, std::size_t max_bytes) {
  MemsetRewrite result;
  std::size_t count = 0;
  WORKLOAD_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) WORKLOAD_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  nodes.resize(count);
  std::vector<cudaGraphNode_t> before, after;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    WORKLOAD_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeMemset) continue;
    cudaMemsetParams m{};
    WORKLOAD_CUDA_CHECK(cudaGraphMemsetNodeGetParams(node, &m));
    const std::size_t bytes = m.width * m.elementSize * m.height;
    const bool known_size = m.elementSize == 1 || m.elementSize == 2 || m.elementSize == 4;
    if (bytes > max_bytes || !known_size || !plain_edges(node, true, before) ||
        !plain_edges(node, false, after)) {
      ++result.kept;
      continue;
    }
    const std::size_t elements = m.width * m.height;
    const unsigned blocks = static_cast<unsigned>(
        std::min<std::size_t>((elements + kThreads - 1) / kThreads, kMaxBlocks));
    void* dst = m.dst;
    void* args[] = {&dst, &m.pitch, &m.value, &m.elementSize, &m.width, &m.height};
    cudaKernelNodeParams k{};
    k.func = reinterpret_cast<void*>(&graph_memset);
    k.gridDim = dim3(blocks > 0 ? blocks : 1);
    k.blockDim = dim3(kThreads);
    k.kernelParams = args;  // copied into the node
    cudaGraphNode_t kernel = nullptr;
    WORKLOAD_CUDA_CHECK(cudaGraphAddKernelNode(&kernel, graph, before.data(), before.size(), &k));
    for (cudaGraphNode_t next : after) add_edge(graph, kernel, next);
    WORKLOAD_CUDA_CHECK(cudaGraphDestroyNode(node));  // and its edges
    ++result.kernels;
    result.kernel_bytes += static_cast<std::int64_t>(bytes);
  }
  return result;
}

}  // namespace workload
