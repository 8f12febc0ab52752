// One loader batch through the GPU decode stage, in stages (as DALI's nvJPEG decoder runs a batch:
// parse and bucket the samples by decode method, then process each bucket): plan the routes,
// decode on the engines, decode the fallbacks on the CPU, upload and resize, complete.
#pragma once

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data_pipeline/gpu/decode_counters.h"
#include "data_pipeline/gpu/decode_resources.h"
#include "data_pipeline/gpu/output_pool.h"
#include "data_pipeline/gpu/resize_normalize.h"
#include "data_pipeline/loader.h"
#include "data_pipeline/loader_options.h"
#include "data_pipeline/sample_reader.h"

namespace data_pipeline::gpu {

/// Turns a staged loader batch into a device batch in an output buffer, all on the stage's stream:
///
///   1. plan_routes: which samples the engines take (nvjpegDecodeBatchedSupportedEx with the crop
///      as region of interest), which the loader threads already decoded on the CPU path (their
///      pixels are in the ring), and which the engines refuse (decoded here), counting each;
///   2. decode_on_engines: the crops' places in the decode set, then one nvjpegDecodeBatchedEx;
///      a batch nvJPEG fails falls back whole;
///   3. upload_ring_pixels, then decode_fallbacks: the CPU path's pixels copied in, those of the
///      refused or failed samples decoded here first (with the bad-image policy);
///   4. upload_labels_and_resize: the labels, then the resize kernel over the engines' crops;
///   5. complete: the ready events, the batch's views, its count, and the ring slot released
///      behind an event.
/// Without engines every sample's pixels come from the ring: step 2 and the resize are skipped. The
/// engines ignore stream order, so a decode set is rewritten only after the host has waited for its
/// previous batch's work (DecodeResources::reuse_next_set); the output buffers are written by
/// stream-ordered copies and kernels only.
///
/// Constructed on any thread, then used by the stage's thread only.
class BatchDecoder {
 public:
  /// `hardware`: the engines decode (`resources` has its handle open and its decode sets).
  /// `before_resize`, when set, is called with the stream before each resize launch.
  BatchDecoder(std::unique_ptr<DecodeResources> resources, std::unique_ptr<SampleReader> reader,
               std::shared_ptr<OutputPool> pool, const LoaderOptions& options, bool hardware,
               std::function<void(cudaStream_t)> before_resize, DecodeCounters& counters);
  ~BatchDecoder();
  BatchDecoder(const BatchDecoder&) = delete;
  BatchDecoder& operator=(const BatchDecoder&) = delete;

  /// Decodes `host` into output buffer `slot` (acquired from the pool) and returns it as a device
  /// batch with the loader batch's information; the work is queued, `ready()` follows it.
  /// \throws DataError for a bad image under the kError policy (naming the batch and sample);
  ///         std::runtime_error when CUDA or nvJPEG fail.
  DeviceBatch decode(Batch host, std::size_t slot);
  /// Blocks until the stage's queued work has run.
  void synchronize();

 private:
  using DecodeSet = DecodeResources::DecodeSet;
  // How one batch's samples are decoded (DALI's buckets by decode method); kept across batches to
  // reuse its memory.
  struct Plan {
    std::vector<int> hardware;  // on the engines, in order: the i-th uses params[i] and jobs[i]
    std::vector<std::int64_t> from_ring;            // decoded by the loader threads, in the ring
    std::vector<std::pair<int, std::string>> redo;  // refused or failed: decoded here, and why
  };

  void plan_routes(const Batch& host, const DeviceBatch& batch, DecodeSet& set);
  void plan_without_engines(const DeviceBatch& batch);
  bool engines_accept(const StagedImage& staged, const std::uint8_t* bytes, nvjpegDecodeParams_t p);
  void decode_on_engines(const Batch& host, const DeviceBatch& batch, DecodeSet& set);
  void lay_out_crops(const DeviceBatch& batch, DecodeSet& set);
  nvjpegStatus_t submit_to_engines(const Batch& host, const DeviceBatch& batch, DecodeSet& set);
  void upload_ring_pixels(const Batch& host, std::uint8_t* out_images);
  void decode_fallbacks(DeviceBatch& batch, DecodeSet& set, std::uint8_t* out_images);
  SampleResult read_on_cpu(const DeviceBatch& batch, int k, std::uint8_t* dst);
  void upload_labels_and_resize(DecodeSet& set, std::size_t slot, std::int64_t n,
                                std::uint8_t* out_images);
  void complete(DeviceBatch& batch, Batch& host, DecodeSet& set, std::size_t slot);

  // Declared so that the pool goes first, then the reader, then nvJPEG and the stream.
  std::unique_ptr<DecodeResources> resources_;
  std::unique_ptr<SampleReader> reader_;  // the stage's CPU fallback
  std::shared_ptr<OutputPool> pool_;
  DecodeCounters& counters_;
  const bool hardware_;
  const std::function<void(cudaStream_t)> before_resize_;
  const std::int64_t batch_size_;
  const std::size_t sample_bytes_;  // one sample's pixels, as the CPU path writes them
  ResizeOutput resize_out_;         // all but the images pointer, fixed by the options
  Plan plan_;                       // the current batch's
};

}  // namespace data_pipeline::gpu
