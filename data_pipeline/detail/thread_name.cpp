// Naming threads for the OS and for NVTX.
#include "data_pipeline/detail/thread_name.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace data_pipeline::detail {

void name_current_thread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  nvtxNameOsThreadA(static_cast<uint32_t>(::syscall(SYS_gettid)), name.c_str());
}

}  // namespace data_pipeline::detail
