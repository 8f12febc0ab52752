// Tests for hash64: determinism and sensitivity to every byte, position, length and seed.
#include "common/hash64.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

namespace common {
namespace {

std::vector<unsigned char> bytes(std::size_t n) {
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 131 + 7) % 251);
  return v;
}

TEST(Hash64Test, DeterministicAndSeeded) {
  const auto v = bytes(1000);
  EXPECT_EQ(hash64(v.data(), v.size(), 3), hash64(v.data(), v.size(), 3));
  EXPECT_NE(hash64(v.data(), v.size(), 3), hash64(v.data(), v.size(), 4));
}

TEST(Hash64Test, EveryBitOfEveryByteMatters) {
  for (std::size_t n : {1u, 7u, 8u, 63u, 64u, 65u, 200u}) {
    auto v = bytes(n);
    const auto base = hash64(v.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      for (int b = 0; b < 8; ++b) {
        v[i] ^= static_cast<unsigned char>(1 << b);
        ASSERT_NE(hash64(v.data(), n), base) << "n=" << n << " byte " << i << " bit " << b;
        v[i] ^= static_cast<unsigned char>(1 << b);
      }
    }
  }
}

TEST(Hash64Test, ReorderedBlocksAndLengthsDiffer) {
  auto v = bytes(640);
  const auto base = hash64(v.data(), v.size());
  auto w = v;
  std::swap_ranges(w.begin(), w.begin() + 64, w.begin() + 128);  // swap two 64-byte blocks
  EXPECT_NE(hash64(w.data(), w.size()), base);
  std::vector<unsigned char> zeros(64, 0), longer(65, 0);
  EXPECT_NE(hash64(zeros.data(), 64), hash64(longer.data(), 65));
  EXPECT_NE(hash64(zeros.data(), 0), hash64(zeros.data(), 1));
}

TEST(Hash64Test, FewCollisionsOnSimilarInputs) {
  std::set<std::uint64_t> seen;
  std::vector<std::uint32_t> v(256, 0);
  for (std::uint32_t i = 0; i < 20000; ++i) {
    v[i % 256] = i;
    seen.insert(hash64(v.data(), v.size() * 4));
  }
  EXPECT_EQ(seen.size(), 20000u);
}

}  // namespace
}  // namespace common
