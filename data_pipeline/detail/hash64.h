// A fast non-cryptographic 64-bit hash for batch digests (reproducibility checks, not security).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace data_pipeline::detail {

/// Hashes `size` bytes at `data` with `seed`. Four independent 64-bit lanes keep the multiplier
/// pipeline busy (several GB/s), so a worker can digest each sample it writes while the bytes are
/// still in cache. Stable across platforms of the same endianness; not a standard algorithm.
inline std::uint64_t hash64(const void* data, std::size_t size, std::uint64_t seed = 0) {
  constexpr std::uint64_t kP1 = 0x9E3779B185EBCA87ULL;
  constexpr std::uint64_t kP2 = 0xC2B2AE3D27D4EB4FULL;
  constexpr std::uint64_t kP3 = 0x165667B19E3779F9ULL;
  auto rotl = [](std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); };
  auto round = [&](std::uint64_t acc, std::uint64_t lane) {
    acc += lane * kP2;
    acc = rotl(acc, 31);
    return acc * kP1;
  };
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = seed + kP3 + size;
  std::uint64_t v[4] = {seed + kP1 + kP2, seed + kP2, seed, seed - kP1};
  std::size_t i = 0;
  for (; i + 32 <= size; i += 32) {
    for (int k = 0; k < 4; ++k) {
      std::uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      v[k] = round(v[k], w);
    }
  }
  h += rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18);
  for (int k = 0; k < 4; ++k) h = (h ^ round(0, v[k])) * kP1 + kP3;
  for (; i + 8 <= size; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = rotl(h ^ round(0, w), 27) * kP1 + kP3;
  }
  for (; i < size; ++i) h = rotl(h ^ (p[i] * kP3), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

}  // namespace data_pipeline::detail
