// The data_pipeline NVTX domain: ranges and thread names through NVTX3's C API.
#include "data_pipeline/nvtx_domain.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nvtx3/nvtx3.hpp>

namespace data_pipeline::nvtx {

namespace {
struct Domain {
  static constexpr const char* name{kDomain};
};
// Registered once, on first use (never when NVTX is off). Its registration is also NVTX's own
// one-time initialisation, which writes NVTX's function pointers without synchronisation while
// another thread's first call may read them: inside this function-local static's guard, it
// happens before every call of this file's that goes through domain() first (ThreadSanitizer's
// report on two threads naming themselves at once, tests/lib/distributed/watchdog_test).
nvtxDomainHandle_t domain() { return nvtx3::domain::get<Domain>(); }
}  // namespace

ScopedRange::ScopedRange(const char* name) noexcept : active_(enabled()) {
  if (active_) nvtxDomainRangePushEx(domain(), nvtx3::event_attributes{nvtx3::message{name}}.get());
}

ScopedRange::~ScopedRange() {
  if (active_) nvtxDomainRangePop(domain());
}

void name_current_thread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  if (enabled()) {
    static_cast<void>(domain());  // NVTX initialised before this thread's first call (above)
    nvtxNameOsThreadA(static_cast<uint32_t>(::syscall(SYS_gettid)), name.c_str());
  }
}

}  // namespace data_pipeline::nvtx
