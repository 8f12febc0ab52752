// What autocast casts to for a run's --precision.
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>

#include "lib/config/train_config.h"

namespace workload {

/// The dtype forward runs in under autocast for `p`: bfloat16, float16, or none (fp32: autocast
/// off).
inline std::optional<at::ScalarType> autocast_type(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return at::kBFloat16;
    case Precision::kFp16:
      return at::kHalf;
    case Precision::kFp32:
      break;
  }
  return std::nullopt;
}

}  // namespace workload
