// RAII for CUDA bf16 autocast across LibTorch versions (the API changed in 2.4), and for its cache.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace workload {

/// Enables CUDA autocast to bfloat16 for its scope when `enabled`, restoring the previous state on
/// exit and clearing autocast's weight cache when the outermost scope ends (as
/// `torch.autocast("cuda", dtype=torch.bfloat16)` does). Neither copyable nor movable; one thread.
class AutocastGuard {
 public:
  explicit AutocastGuard(bool enabled) : enabled_(enabled) {
    if (!enabled_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    previous_enabled_ = at::autocast::is_autocast_enabled(at::kCUDA);
    previous_dtype_ = at::autocast::get_autocast_dtype(at::kCUDA);
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
#else
    previous_enabled_ = at::autocast::is_enabled();
    previous_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
#endif
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_enabled(at::kCUDA, previous_enabled_);
    at::autocast::set_autocast_dtype(at::kCUDA, previous_dtype_);
#else
    at::autocast::set_enabled(previous_enabled_);
    at::autocast::set_autocast_gpu_dtype(previous_dtype_);
#endif
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;
  AutocastGuard(AutocastGuard&&) = delete;
  AutocastGuard& operator=(AutocastGuard&&) = delete;

 private:
  bool enabled_;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kHalf;
};

/// Turns autocast's cache of cast weights off for its scope, restoring the previous setting: a CUDA
/// graph capture must record every cast, not reuse a tensor cast before it (as
/// `torch.autocast(..., cache_enabled=False)` inside `torch.cuda.graph`). Neither copyable nor
/// movable; one thread.
class AutocastCacheOff {
 public:
  AutocastCacheOff() : previous_(at::autocast::is_autocast_cache_enabled()) {
    at::autocast::set_autocast_cache_enabled(false);
  }
  ~AutocastCacheOff() { at::autocast::set_autocast_cache_enabled(previous_); }
  AutocastCacheOff(const AutocastCacheOff&) = delete;
  AutocastCacheOff& operator=(const AutocastCacheOff&) = delete;
  AutocastCacheOff(AutocastCacheOff&&) = delete;
  AutocastCacheOff& operator=(AutocastCacheOff&&) = delete;

 private:
  bool previous_;
};

}  // namespace workload
