// One batch through the GPU decode stage: the routes, the engines, the CPU fallbacks, the uploads
// and the resize, on the stage's thread and stream.
#include "data_pipeline/gpu/batch_decoder.h"

#include <algorithm>
#include <cstring>

#include "common/align.h"
#include "common/cuda_check.h"
#include "data_pipeline/augment.h"
#include "data_pipeline/data_error.h"
#include "data_pipeline/decode_route.h"
#include "data_pipeline/gpu/nvjpeg_handles.h"
#include "data_pipeline/nvtx_domain.h"

namespace data_pipeline::gpu {

BatchDecoder::BatchDecoder(std::unique_ptr<DecodeResources> resources,
                           std::unique_ptr<SampleReader> reader, std::shared_ptr<OutputPool> pool,
                           const LoaderOptions& options, bool hardware,
                           std::function<void(cudaStream_t)> before_resize,
                           DecodeCounters& counters)
    : resources_(std::move(resources)),
      reader_(std::move(reader)),
      pool_(std::move(pool)),
      counters_(counters),
      hardware_(hardware),
      before_resize_(std::move(before_resize)),
      batch_size_(options.batch_size),
      sample_bytes_(data_pipeline::sample_bytes(options.transform)) {
  resize_out_.size = options.transform.image_size;
  resize_out_.float32 = options.transform.dtype == HostDType::kFloat32;
  resize_out_.planar = options.transform.layout == ImageLayout::kNchw;
  for (int c = 0; c < 3; ++c) {
    resize_out_.mean[c] = kImageNetMean[static_cast<std::size_t>(c)];
    resize_out_.std[c] = kImageNetStd[static_cast<std::size_t>(c)];
  }
}

BatchDecoder::~BatchDecoder() = default;

void BatchDecoder::synchronize() { resources_->stream.synchronize(); }

DeviceBatch BatchDecoder::decode(Batch host, std::size_t slot) {
  DeviceBatch batch;
  batch.owner_ = pool_;
  batch.slot_ = slot;
  // The loader's batch information moves over; `host` keeps its lease (and size) until the
  // batch's work no longer reads its slot.
  static_cast<BatchInfo&>(batch) = std::move(static_cast<BatchInfo&>(host));
  const std::int64_t n = batch.size();
  auto* out_images = static_cast<std::uint8_t*>(pool_->images(slot).data_ptr());

  // The set whose buffers this batch decodes into, its previous batch's work waited for.
  DecodeSet& set = resources_->reuse_next_set();
  std::memcpy(set.labels_host.data(), host.labels().data_ptr<std::int64_t>(),
              static_cast<std::size_t>(n) * sizeof(std::int64_t));

  plan_.hardware.clear();
  plan_.from_ring.clear();
  plan_.redo.clear();
  if (hardware_) {
    nvtx::ScopedRange range(nvtx::kGpuDecode);
    plan_routes(host, batch, set);
    decode_on_engines(host, batch, set);
  } else {
    plan_without_engines(batch);
  }
  upload_ring_pixels(host, out_images);
  decode_fallbacks(batch, set, out_images);
  upload_labels_and_resize(set, slot, n, out_images);
  complete(batch, host, set, slot);
  return batch;
}

// --- 1. Plan: bucket the samples by how they are decoded ---------------------------------------

void BatchDecoder::plan_routes(const Batch& host, const DeviceBatch& batch, DecodeSet& set) {
  for (std::int64_t k = 0; k < batch.size(); ++k) {
    const StagedImage& st = batch.staged()[static_cast<std::size_t>(k)];
    if (st.route != DecodeRoute::kHardware) {
      counters_.add_fallback(st.reason, 1);
      plan_.from_ring.push_back(k);
      continue;
    }
    nvjpegDecodeParams_t p = set.params[plan_.hardware.size()].get();
    if (engines_accept(st, st.bytes(host.sample_area(k)), p)) {
      plan_.hardware.push_back(static_cast<int>(k));
    } else {
      plan_.redo.emplace_back(static_cast<int>(k), "refused by nvjpegDecodeBatchedSupportedEx");
      counters_.add_refused();
    }
  }
}

void BatchDecoder::plan_without_engines(const DeviceBatch& batch) {
  counters_.add_fallback("no hardware JPEG decoder", batch.size());
  for (std::int64_t k = 0; k < batch.size(); ++k) plan_.from_ring.push_back(k);
}

// Sets the crop as the region of interest of decode parameters `p` and asks nvJPEG whether the
// engines take the image so.
bool BatchDecoder::engines_accept(const StagedImage& st, const std::uint8_t* bytes,
                                  nvjpegDecodeParams_t p) {
  const CropRect& c = st.params.crop;
  WORKLOAD_NVJPEG_CHECK(nvjpegDecodeParamsSetROI(p, c.x, c.y, c.width, c.height));
  const DecodeResources& r = *resources_;
  int unsupported = 1;
  return nvjpegJpegStreamParseHeader(r.handle.get(), bytes, st.size, r.parsed.get()) ==
             NVJPEG_STATUS_SUCCESS &&
         nvjpegDecodeBatchedSupportedEx(r.handle.get(), r.parsed.get(), p, &unsupported) ==
             NVJPEG_STATUS_SUCCESS &&
         unsupported == 0;
}

// --- 2. The engines ----------------------------------------------------------------------------

void BatchDecoder::decode_on_engines(const Batch& host, const DeviceBatch& batch, DecodeSet& set) {
  lay_out_crops(batch, set);
  if (plan_.hardware.empty()) return;
  const nvjpegStatus_t status = submit_to_engines(host, batch, set);
  if (status == NVJPEG_STATUS_SUCCESS) return;
  // The engines failed the batch: re-initialise next time, decode its images here.
  set.initialized_for = 0;
  counters_.add_failed_batch();
  for (int k : plan_.hardware) {
    plan_.redo.emplace_back(k, std::string("the hardware decoder failed its batch (") +
                                   nvjpeg_status_name(status) + ")");
  }
  plan_.hardware.clear();
}

// Where each crop and its rows go in the set's buffers: the CropJob table, and room for them.
void BatchDecoder::lay_out_crops(const DeviceBatch& batch, DecodeSet& set) {
  std::size_t decoded_bytes = 0, scratch_bytes_total = 0;
  auto* jobs = static_cast<CropJob*>(set.jobs_host.data());
  for (std::size_t i = 0; i < plan_.hardware.size(); ++i) {
    const StagedImage& st = batch.staged()[static_cast<std::size_t>(plan_.hardware[i])];
    const CropRect& c = st.params.crop;
    CropJob& job = jobs[i];
    job.source = decoded_bytes;
    job.scratch = scratch_bytes_total;
    job.width = c.width;
    job.height = c.height;
    job.sample = plan_.hardware[i];
    job.flip = st.params.flip ? 1 : 0;
    decoded_bytes += common::align_up(static_cast<std::size_t>(c.width) * c.height * 3);
    scratch_bytes_total += common::align_up(gpu::scratch_bytes(c.height, resize_out_.size));
  }
  if (plan_.hardware.empty()) return;
  set.decoded.reserve(decoded_bytes);
  set.scratch.reserve(scratch_bytes_total);
}

// One nvjpegDecodeBatchedEx for the planned crops, (re)initialising the set's state for a new
// batch size first; the status of the first call that failed.
nvjpegStatus_t BatchDecoder::submit_to_engines(const Batch& host, const DeviceBatch& batch,
                                               DecodeSet& set) {
  DecodeResources& r = *resources_;
  const std::vector<int>& hardware = plan_.hardware;
  const auto* jobs = static_cast<const CropJob*>(set.jobs_host.data());
  const int m = static_cast<int>(hardware.size());
  r.data.resize(hardware.size());
  r.lengths.resize(hardware.size());
  r.outputs.assign(hardware.size(), nvjpegImage_t{});
  r.params.resize(hardware.size());
  for (std::size_t i = 0; i < hardware.size(); ++i) {
    const StagedImage& st = batch.staged()[static_cast<std::size_t>(hardware[i])];
    r.data[i] = st.bytes(host.sample_area(hardware[i]));
    r.lengths[i] = st.size;
    r.outputs[i].channel[0] = set.decoded.data() + jobs[i].source;
    r.outputs[i].pitch[0] = static_cast<std::size_t>(jobs[i].width) * 3;
    r.params[i] = set.params[i].get();
  }
  nvjpegStatus_t status = NVJPEG_STATUS_SUCCESS;
  if (set.initialized_for != m) {
    status =
        nvjpegDecodeBatchedInitialize(r.handle.get(), set.state.get(), m, 1, NVJPEG_OUTPUT_RGBI);
    set.initialized_for = status == NVJPEG_STATUS_SUCCESS ? m : 0;
  }
  if (status == NVJPEG_STATUS_SUCCESS) {
    status = nvjpegDecodeBatchedEx(r.handle.get(), set.state.get(), r.data.data(), r.lengths.data(),
                                   r.outputs.data(), r.params.data(), r.stream.get());
  }
  return status;
}

// --- 3. The CPU path's pixels: from the ring, or decoded here ----------------------------------

void BatchDecoder::upload_ring_pixels(const Batch& host, std::uint8_t* out_images) {
  for (const std::int64_t k : plan_.from_ring) {
    WORKLOAD_CUDA_CHECK(cudaMemcpyAsync(out_images + static_cast<std::size_t>(k) * sample_bytes_,
                                        host.sample_area(k), sample_bytes_, cudaMemcpyHostToDevice,
                                        resources_->stream.get()));
  }
}

void BatchDecoder::decode_fallbacks(DeviceBatch& batch, DecodeSet& set, std::uint8_t* out_images) {
  if (plan_.redo.empty()) return;
  nvtx::ScopedRange range(nvtx::kDecodeFallback);
  if (set.pixels_host.size() == 0) {
    set.pixels_host = HostBlock(sample_bytes_ * static_cast<std::size_t>(batch_size_), true);
  }
  auto* pixels = static_cast<std::uint8_t*>(set.pixels_host.data());
  auto* labels_host = static_cast<std::int64_t*>(set.labels_host.data());
  for (const auto& [k, reason] : plan_.redo) {
    std::uint8_t* dst = pixels + static_cast<std::size_t>(k) * sample_bytes_;
    SampleResult r = read_on_cpu(batch, k, dst);
    labels_host[k] = r.label;
    if (r.skipped) {
      const bool known = std::any_of(
          batch.skipped_.begin(), batch.skipped_.end(),
          [&](const SkippedImage& s2) { return s2.dataset_index == r.skipped->dataset_index; });
      if (!known) batch.skipped_.push_back(std::move(*r.skipped));
    }
    counters_.add_fallback(reason, 1);
    WORKLOAD_CUDA_CHECK(cudaMemcpyAsync(out_images + static_cast<std::size_t>(k) * sample_bytes_,
                                        dst, sample_bytes_, cudaMemcpyHostToDevice,
                                        resources_->stream.get()));
  }
}

// The CPU path on sample `k`'s original image, with the bad-image policy: what --decode cpu makes
// of this sample.
SampleResult BatchDecoder::read_on_cpu(const DeviceBatch& batch, int k, std::uint8_t* dst) {
  try {
    return reader_->read(batch.epoch(), batch.indices()[static_cast<std::size_t>(k)], dst);
  } catch (const DataError& err) {
    throw DataError("loader (batch " + std::to_string(batch.index_in_epoch()) + " of epoch " +
                    std::to_string(batch.epoch()) + ", sample " + std::to_string(k) +
                    ", GPU stage fallback): " + err.what());
  }
}

// --- 4. Labels and the resize kernel ----------------------------------------------------------

void BatchDecoder::upload_labels_and_resize(DecodeSet& set, std::size_t slot, std::int64_t n,
                                            std::uint8_t* out_images) {
  cudaStream_t stream = resources_->stream.get();
  WORKLOAD_CUDA_CHECK(cudaMemcpyAsync(
      pool_->labels(slot).data_ptr<std::int64_t>(), set.labels_host.data(),
      static_cast<std::size_t>(n) * sizeof(std::int64_t), cudaMemcpyHostToDevice, stream));
  if (plan_.hardware.empty()) return;
  nvtx::ScopedRange range(nvtx::kResizeNormalize);
  const int m = static_cast<int>(plan_.hardware.size());
  const auto* jobs = static_cast<const CropJob*>(set.jobs_host.data());
  const ResizeShape shape = resize_shape(jobs, m, resize_out_.size);
  set.taps.reserve(taps_bytes(shape, resize_out_.size));
  WORKLOAD_CUDA_CHECK(cudaMemcpyAsync(set.jobs.data(), set.jobs_host.data(),
                                      sizeof(CropJob) * static_cast<std::size_t>(m),
                                      cudaMemcpyHostToDevice, stream));
  ResizeOutput out = resize_out_;
  out.images = out_images;
  if (before_resize_) before_resize_(stream);
  resize_normalize(set.jobs.data<CropJob>(), shape, set.decoded.data(), set.taps.data<int>(),
                   set.scratch.data(), out, stream);
}

// --- 5. Complete: events, views, counts, the ring slot -----------------------------------------

void BatchDecoder::complete(DeviceBatch& batch, Batch& host, DecodeSet& set, std::size_t slot) {
  cudaStream_t stream = resources_->stream.get();
  const std::int64_t n = batch.size();
  set.done.record(stream);
  pool_->ready(slot).record(stream);
  batch.ready_ = pool_->ready(slot).get();
  batch.hardware_images_ = static_cast<std::int64_t>(plan_.hardware.size());
  batch.images_ = pool_->batch_view(slot, n);
  batch.labels_ = pool_->labels(slot).narrow(0, 0, n);
  counters_.add_batch(batch.hardware_images_);
  // The ring slot is read by this batch's copies and by the decoder's input transfers.
  auto consumed = std::make_shared<CudaEvent>();
  consumed->record(stream);
  host.release_after([consumed] { consumed->synchronize(); });
}

}  // namespace data_pipeline::gpu
