// Preloaded (LD_PRELOAD) into train_resnet50 by failure_modes_test. Like the injection library of a
// profiler such as Nsight Systems, it starts a thread before main() runs, with the default signal
// mask: a process-directed SIGINT/SIGTERM may then be delivered to this thread rather than to one
// of the program's own.
#include <pthread.h>
#include <unistd.h>

#include <cstdio>

namespace {

void* idle(void*) {
  for (;;) pause();  // returns after each handled signal
  return nullptr;
}

__attribute__((constructor)) void start_foreign_thread() {
  pthread_t thread;
  if (pthread_create(&thread, nullptr, idle, nullptr) == 0) {
    pthread_detach(thread);
    std::fprintf(stderr, "foreign_thread: started\n");
  }
}

}  // namespace
