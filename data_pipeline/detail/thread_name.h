// Naming threads for the OS and for NVTX, and the data_pipeline NVTX domain for worker ranges.
#pragma once

#include <nvtx3/nvtx3.hpp>

#include <string>

namespace data_pipeline::detail {

/// NVTX domain of the loader's worker ranges, kept out of the default domain so the training
/// step's range tree (which scripts parse) stays exactly as specified.
struct NvtxDomain {
  static constexpr const char* name{"data_pipeline"};
};

/// A push/pop range in the data_pipeline domain on the calling thread. Neither copyable nor
/// movable: it closes where it was opened.
using WorkerRange = nvtx3::scoped_range_in<NvtxDomain>;

/// Names the calling thread for the OS (truncated to 15 characters, the kernel's limit) and for
/// NVTX (full name, shown by Nsight Systems on the thread's row).
void name_current_thread(const std::string& name);

}  // namespace data_pipeline::detail
