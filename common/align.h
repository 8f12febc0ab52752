// The alignment of the buffers carved out of one allocation (the ring's slots, the GPU stage's
// crops).
#pragma once

#include <cstddef>

namespace common {

/// Bytes every carved buffer starts on: cudaMalloc's own alignment, enough for any element type
/// and for coalesced device access.
inline constexpr std::size_t kBufferAlign = 256;

/// `bytes` rounded up to a multiple of kBufferAlign.
constexpr std::size_t align_up(std::size_t bytes) {
  return (bytes + kBufferAlign - 1) / kBufferAlign * kBufferAlign;
}

}  // namespace common
