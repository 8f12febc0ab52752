// A fast non-cryptographic 64-bit hash for batch digests (reproducibility checks, not security).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace common {

/// Hashes `size` bytes at `data` with `seed`.
///
/// Eight independent lanes each add, per 64-byte block, the word itself and the 32 x 32 -> 64-bit
/// product of its halves after mixing in a key that depends on the lane and the block's position
/// (so reordered blocks hash differently). Those operations vectorise (SSE2/AVX2 `pmuludq`), which
/// lets a worker digest each 600 KB sample it writes while the bytes are still in cache, at a small
/// fraction of the decode's cost. A strong 64-bit finaliser mixes the lanes and the tail. Stable
/// for a given input and seed on little-endian machines; not a standard algorithm, not
/// collision-resistant against an adversary.
inline std::uint64_t hash64(const void* data, std::size_t size, std::uint64_t seed = 0) {
  auto mix = [](std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t key[8], acc[8];
  for (int j = 0; j < 8; ++j) {
    key[j] = mix(seed + 0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(j + 1));
    acc[j] = key[j];
  }
  std::size_t i = 0;
  std::uint64_t block = 0;
  for (; i + 64 <= size; i += 64, ++block) {
    const std::uint64_t position = block * 0xD6E8FEB86659FD93ULL;
    for (int j = 0; j < 8; ++j) {
      std::uint64_t w;
      std::memcpy(&w, p + i + 8 * static_cast<std::size_t>(j), 8);
      const std::uint64_t x = w ^ (key[j] + position);
      acc[j] += (x & 0xFFFFFFFFULL) * (x >> 32);
      acc[j] += w;
    }
  }
  std::uint64_t h = mix(seed ^ size);
  for (int j = 0; j < 8; ++j) h = mix(h ^ acc[j]) + key[j];
  for (; i + 8 <= size; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix(h ^ w) + 0x9E3779B97F4A7C15ULL;
  }
  std::uint64_t tail = 0;
  if (i < size) std::memcpy(&tail, p + i, size - i);
  return mix(h ^ tail ^ (static_cast<std::uint64_t>(size - i) << 56));
}

}  // namespace common
