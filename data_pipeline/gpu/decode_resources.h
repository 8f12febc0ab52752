// What the GPU decode stage decodes with: nvJPEG's hardware decoder (library handle, decoder
// states, decode parameters), the stage's stream, and the buffers of each batch in flight.
#pragma once

#include <nvjpeg.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "data_pipeline/gpu/cuda_resources.h"
#include "data_pipeline/gpu/nvjpeg_handles.h"
#include "data_pipeline/gpu_decode_stats.h"
#include "data_pipeline/host_block.h"

namespace data_pipeline::gpu {

/// nvJPEG's objects and the stage's CUDA resources. Created on the constructing thread (the
/// current device being the stage's), then used by the stage's thread only.
///
/// Destruction order matters: the decode sets (their states and parameters) are declared after the
/// library handle, so they go before it.
struct DecodeResources {
  /// One hardware batch in flight: its decoder state, its buffers, and the event after the last
  /// work that reads them. The engines do not honour stream order, so a set is reused only once
  /// the host has waited for `done` (reuse_next_set).
  struct DecodeSet {
    NvjpegState state;
    int initialized_for = 0;  // batch size of the last nvjpegDecodeBatchedInitialize, 0: none
    std::vector<NvjpegParams> params;
    DeviceMemory decoded;  // the crops, RGBI
    DeviceMemory scratch;  // their rows after the horizontal pass
    DeviceMemory taps;     // the resize's weight table
    DeviceMemory jobs;
    HostBlock jobs_host;    // page-locked CropJob array
    HostBlock labels_host;  // page-locked labels of the batch (fallbacks may replace some)
    HostBlock pixels_host;  // page-locked pixels decoded here on the CPU (allocated on demand)
    CudaEvent done;
  };

  /// Creates the parsed-stream handle and `count` decode sets for batches of up to `batch_size`
  /// when the engines decode (`hardware`, the handle open), else the one set of page-locked labels
  /// that copying the CPU path's batches needs.
  /// \throws std::runtime_error when nvJPEG or CUDA fail.
  void create_sets(bool hardware, int count, std::int64_t batch_size);
  /// The next set in turn, once the host has waited for its previous batch's work (in a
  /// `reuse_fence` range): its buffers may be rewritten, by the engines too.
  DecodeSet& reuse_next_set();

  NvjpegHandle handle;  // empty without the engines
  NvjpegStream parsed;  // header parsing for nvjpegDecodeBatchedSupportedEx
  CudaStream stream;    // the stage's: every copy and kernel, and the engines' submissions
  std::vector<DecodeSet> sets;
  std::size_t next_set = 0;
  // nvjpegDecodeBatchedEx's argument arrays, rebuilt per batch (kept to reuse their memory).
  std::vector<const unsigned char*> data;
  std::vector<std::size_t> lengths;
  std::vector<nvjpegImage_t> outputs;
  std::vector<nvjpegDecodeParams_t> params;
};

/// Opens nvJPEG's hardware decoder into `handle` when `use_engines`; says what it found:
/// `hardware` true when the engines decode, else a notice why not (a GPU without engines, or
/// use_engines false). \throws std::runtime_error when nvJPEG fails otherwise.
GpuDecodeInfo open_hardware_decoder(bool use_engines, NvjpegHandle& handle);

}  // namespace data_pipeline::gpu
