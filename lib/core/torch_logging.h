// LibTorch's logging, set up so that the program's own message is the first line a failure prints.
#pragma once

namespace workload {

/// Sets up LibTorch's logging (glog in Debian's build, c10's own in PyTorch's) so that the
/// program's own message is the first line a failure prints: glog initialised (no "Logging before
/// InitGoogleLogging()" banner) and LibTorch's lines below FATAL dropped, since they repeat what
/// the program's messages say (c10d's connection retries and errors); TORCH_CPP_LOG_LEVEL
/// (PyTorch's variable: INFO, WARNING, ERROR or FATAL) brings them back. Call once, first thing in
/// main.
void init_torch_logging(const char* argv0);

}  // namespace workload
