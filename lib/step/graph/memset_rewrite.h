// Rewrites a captured CUDA graph's small memset nodes into kernel nodes doing the same writes.
// Plain CUDA: no LibTorch in this header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace workload {

/// What rewrite_memsets() did to a graph.
struct MemsetRewrite {
  int kernels = 0;  ///< Memset nodes replaced by kernel nodes.
  int kept = 0;     ///< Memset nodes left as they were (larger than the limit, or with edges of a
                    ///< kind other than full completion).
  std::int64_t kernel_bytes = 0;  ///< Bytes the replacing kernels write per launch of the graph.
};

/// Memsets up to this size are latency-bound: cuDNN's 4- to 448-byte counters and flags are the
/// ones that matter (a 100 MB memset stays a memset node, which runs at the copy bandwidth).
inline constexpr std::size_t kMaxRewrittenMemsetBytes = std::size_t{64} << 10;

/// Replaces every memset node of `graph` (not yet instantiated) that writes at most `max_bytes`
/// with a kernel node that writes the same values to the same addresses (any element size, 1-D or
/// pitched 2-D), taking over the memset's dependencies and dependents, so the graph computes
/// exactly what it did. Why: on the H200 a memset node costs a pipeline bubble around it (the
/// next kernel starts about 2 us after a memset, against at most 0.1 us after a kernel, and the
/// memset waits about 1.4 us for the kernel before it); cuDNN issues some 200 of them in a
/// ResNet-50 training step, before its BatchNorm and convolution kernels.
/// Not thread-safe with respect to `graph`: call it from the thread that owns it, before
/// cudaGraphInstantiate. Child graphs are left as they are.
/// \throws std::runtime_error naming the CUDA call when the graph cannot be read or changed (the
///         graph may then be partly rewritten: do not instantiate it).
MemsetRewrite rewrite_memsets(cudaGraph_t graph, std::size_t max_bytes = kMaxRewrittenMemsetBytes);

}  // namespace workload
