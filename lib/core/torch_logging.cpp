// LibTorch's logging (lib/core/torch_logging.h).
#include "lib/core/torch_logging.h"

#include <c10/util/Logging.h>

#include <cstdlib>
#include <string>

namespace workload {

void init_torch_logging(const char* argv0) {
  // Severities as glog and c10 number them: INFO 0, WARNING 1, ERROR 2, FATAL 3.
  int level = 3;
  if (const char* env = std::getenv("TORCH_CPP_LOG_LEVEL")) {
    const std::string name = env;
    const char* names[] = {"INFO", "WARNING", "ERROR", "FATAL"};
    for (int i = 0; i < 4; ++i) {
      if (name == names[i]) level = i;
    }
  }
#if defined(C10_USE_GLOG)
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = level;
  if (!google::IsGoogleLoggingInitialized()) google::InitGoogleLogging(argv0);
#else
  static_cast<void>(argv0);
  ::FLAGS_caffe2_log_level = level;
#endif
}

}  // namespace workload
