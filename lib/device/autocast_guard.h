// RAII for bf16 autocast across LibTorch versions (the API changed in 2.4), and for its cache;
// what autocast casts to where it is on.
#pragma once

#include <ATen/autocast_mode.h>
#include <c10/core/DeviceType.h>
#include <torch/version.h>

#include <optional>
#include <stdexcept>

namespace workload {

namespace detail {
// Autocast's switches for one device type across LibTorch versions (per-type functions from 2.4,
// CUDA's and the CPU's own before).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
inline bool autocast_enabled(c10::DeviceType t) { return at::autocast::is_autocast_enabled(t); }
inline at::ScalarType autocast_dtype_of(c10::DeviceType t) {
  return at::autocast::get_autocast_dtype(t);
}
// The dtype first: where it is refused (an exception), autocast is left as it was.
inline void set_autocast(c10::DeviceType t, bool enabled, at::ScalarType dtype) {
  at::autocast::set_autocast_dtype(t, dtype);
  at::autocast::set_autocast_enabled(t, enabled);
}
#else
inline bool autocast_enabled(c10::DeviceType t) {
  return t == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
}
inline at::ScalarType autocast_dtype_of(c10::DeviceType t) {
  return t == c10::DeviceType::CPU ? at::autocast::get_autocast_cpu_dtype()
                                   : at::autocast::get_autocast_gpu_dtype();
}
// The dtype first: where it is refused (1.x's CPU autocast takes bfloat16 only), autocast is left
// as it was.
inline void set_autocast(c10::DeviceType t, bool enabled, at::ScalarType dtype) {
  if (t == c10::DeviceType::CPU) {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(enabled);
  } else {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
  }
}
#endif
inline void require_autocast_device(c10::DeviceType t) {
  if (t != c10::DeviceType::CUDA && t != c10::DeviceType::CPU) {
    throw std::invalid_argument("AutocastGuard: autocast here is for CUDA and the CPU only");
  }
}
}  // namespace detail

/// The lower precision autocast casts to on `device` (e.g. bfloat16), or nullopt when autocast is
/// off there (CUDA and the CPU; nullopt for other device types).
inline std::optional<at::ScalarType> autocast_dtype(c10::DeviceType device) {
  if (device != c10::DeviceType::CUDA && device != c10::DeviceType::CPU) return std::nullopt;
  if (!detail::autocast_enabled(device)) return std::nullopt;
  return detail::autocast_dtype_of(device);
}

/// Enables autocast to `dtype` (bfloat16 unless said, or float16) on `device` (CUDA, or the CPU
/// for tests) for its scope when `enabled`, restoring the previous state on exit and clearing
/// autocast's weight cache when the outermost scope ends (as `torch.autocast("cuda", dtype=...)`
/// does). Neither copyable nor movable; one thread.
/// \throws std::invalid_argument for another device type, or a dtype other than those two.
class AutocastGuard {
 public:
  explicit AutocastGuard(bool enabled, c10::DeviceType device = c10::DeviceType::CUDA,
                         at::ScalarType dtype = at::kBFloat16)
      : enabled_(enabled), device_(device) {
    if (!enabled_) return;
    detail::require_autocast_device(device_);
    if (dtype != at::kBFloat16 && dtype != at::kHalf) {
      throw std::invalid_argument("AutocastGuard: autocast here is to bfloat16 or float16 only");
    }
    previous_enabled_ = detail::autocast_enabled(device_);
    previous_dtype_ = detail::autocast_dtype_of(device_);
    detail::set_autocast(device_, true, dtype);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    detail::set_autocast(device_, previous_enabled_, previous_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;
  AutocastGuard(AutocastGuard&&) = delete;
  AutocastGuard& operator=(AutocastGuard&&) = delete;

 private:
  bool enabled_;
  c10::DeviceType device_;
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
