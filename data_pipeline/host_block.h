// An owned block of host memory, page-locked (CUDA) or pageable, allocated once and never resized.
#pragma once

#include <cstddef>

namespace data_pipeline {

/// Owns one block of host memory.
///
/// Page-locked blocks come from `cudaHostAlloc` and can be the source of truly asynchronous
/// host-to-device copies; pageable blocks come from the C++ heap, 4 KiB aligned. Either kind is
/// touched once at allocation, so no page faults happen in steady state. Move-only; the destructor
/// is noexcept and only logs a failed release.
class HostBlock {
 public:
  HostBlock() = default;
  /// Allocates `bytes`. When `page_locked` is requested but unavailable (no CUDA in this build or
  /// no device), falls back to pageable memory; `page_locked()` says which one it got.
  /// \throws std::runtime_error when `bytes` exceeds 80% of physical memory or CUDA refuses the
  ///         allocation; std::bad_alloc when the heap does.
  HostBlock(std::size_t bytes, bool page_locked);
  ~HostBlock();
  HostBlock(HostBlock&& other) noexcept;
  HostBlock& operator=(HostBlock&& other) noexcept;
  HostBlock(const HostBlock&) = delete;
  HostBlock& operator=(const HostBlock&) = delete;

  void* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool page_locked() const { return page_locked_; }

  /// Successful non-empty allocations made by all HostBlocks since the process started (the soak
  /// test checks that the ring is allocated once, never in steady state). Thread-safe.
  static std::size_t allocations();

  /// Physical memory of the machine in bytes (0 when unknown).
  static std::size_t physical_memory();

  /// True when this build and machine can allocate page-locked memory (CUDA device present).
  static bool page_locking_available();

 private:
  void release() noexcept;
  void* data_ = nullptr;
  std::size_t size_ = 0;
  bool page_locked_ = false;
};

}  // namespace data_pipeline
