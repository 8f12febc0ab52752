// The epoch rule of a delivery order that can be restarted (Loader::reset, GpuDecoder::reset):
// which epoch the next traversal starts at.
#pragma once

#include <cstdint>
#include <optional>

namespace data_pipeline {

/// Tracks the first epoch of the current traversal and the last epoch the consumer took a batch
/// from, and picks the next traversal's first epoch from them: the epoch after the last one taken
/// from, or after the traversal's first epoch when none was taken. So a reset never depends on how
/// far the producers had run ahead, only on what the consumer saw (as iter() on a PyTorch
/// DataLoader starts a new epoch). The first traversal starts at epoch 0.
///
/// Not thread-safe: its owner calls it under its own lock (BatchRing, GpuDecoder).
class TraversalEpochs {
 public:
  /// The first epoch of the current traversal.
  std::int64_t first() const { return first_; }
  /// The consumer took a batch of `epoch` (of the current traversal).
  void taken(std::int64_t epoch) { last_taken_ = epoch; }
  /// Starts the next traversal, at `epoch` when given, else by the rule above; returns its first
  /// epoch.
  std::int64_t start_next(std::optional<std::int64_t> epoch = std::nullopt) {
    first_ = epoch ? *epoch : (last_taken_ >= 0 ? last_taken_ : first_) + 1;
    last_taken_ = -1;
    return first_;
  }

 private:
  std::int64_t first_ = 0;
  std::int64_t last_taken_ = -1;  // -1: none taken in this traversal
};

}  // namespace data_pipeline
