// The GPU decode stage as the step's input source (--decode gpu).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data_pipeline/food101_index.h"
#include "data_pipeline/loader_options.h"
#include "lib/input/input_source.h"

namespace workload {

/// Feeds the step from data_pipeline::gpu::GpuDecoder: next() takes the next device batch,
/// submit() makes the current stream wait for the stage's event (no copy, no host wait), and
/// release_after_step() records an event after the step's kernels, which the stage waits before
/// rewriting that buffer. The step's kernels run on a high-priority stream (see
/// input_wants_priority_stream), so the stage's kernels fill the gaps between them.
/// Notices (no engines, --pin-memory=false ignored, the nvJPEG version) go to `notices`.
/// \throws UsageError "--decode gpu: this build has no GPU decode stage (<why>); use --decode cpu"
///         in a build without the stage (no nvJPEG, no CUDA compiler or a CPU LibTorch; validate()
///         refuses --decode gpu there first); as GpuDecoder's constructor otherwise.
std::unique_ptr<InputSource> make_gpu_decode_input(
    std::shared_ptr<const data_pipeline::Food101Index> index,
    const data_pipeline::LoaderOptions& options, torch::Device device,
    std::vector<std::string>& notices);

}  // namespace workload
