// --inject-stall: known host stalls inside named phases of captured steps (lib/stall_injector.h).
#include "lib/stall_injector.h"

#include "lib/cuda_device.h"
#include "lib/nvtx.h"

namespace workload {

void StallInjector::begin_step(int index, bool warmup, std::vector<InjectedStall>* made) {
  step_ = index;
  warmup_ = warmup;
  made_ = made;
}

void StallInjector::at(const char* phase) {
  if (warmup_) return;
  for (const InjectedStall& s : stalls_) {
    if (s.step != step_ || s.phase != phase) continue;
    nvtx::StallRange range(nvtx::kInjectStall);
    device_synchronize();
    stop_.sleep_for(std::chrono::duration<double, std::milli>(s.ms));
    if (made_) made_->push_back(s);
  }
}

}  // namespace workload
