// Counter-based random numbers: every draw is a pure function of (seed, epoch, index, stream, n).
#pragma once

#include <cmath>
#include <cstdint>

namespace data_pipeline {

/// A small counter-based generator (SplitMix64 finaliser over a keyed counter).
///
/// A `CounterRng` is keyed by (seed, epoch, index, stream) and yields the same sequence of draws
/// for the same key on any thread, in any order relative to other keys. The loader keys one
/// generator per (sample, epoch) and one per epoch permutation, so batches never depend on
/// scheduling. Instances are cheap values: create one where it is needed, never share one between
/// threads.
class CounterRng {
 public:
  /// Streams separate independent uses of the same (seed, epoch, index).
  enum Stream : std::uint64_t { kAugment = 1, kPermutation = 2, kReplacement = 3, kSynthetic = 4 };

  CounterRng(std::uint64_t seed, std::uint64_t epoch, std::uint64_t index, std::uint64_t stream)
      : key_(mix(mix(mix(mix(seed ^ 0x243F6A8885A308D3ULL) ^ epoch) ^ index) ^ stream)) {}

  /// Next 64 uniformly distributed bits.
  std::uint64_t next_u64() { return mix(key_ + (++counter_) * 0x9E3779B97F4A7C15ULL); }

  /// Uniform double in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  /// Uniform double in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

  /// Uniform integer in [0, n) without modulo bias; n must be > 0.
  std::uint64_t below(std::uint64_t n) {
    // Rejection sampling on the top of the 64-bit range keeps every value equally likely.
    const std::uint64_t limit = UINT64_MAX - (UINT64_MAX % n);
    std::uint64_t x;
    do {
      x = next_u64();
    } while (x >= limit);
    return x % n;
  }

  /// True with probability p.
  bool bernoulli(double p) { return uniform() < p; }

 private:
  static std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  std::uint64_t key_;
  std::uint64_t counter_ = 0;
};

}  // namespace data_pipeline
