// The GPU decode stage: nvJPEG's batched hardware decoder with per-image regions of interest,
// the CPU path for what it cannot take, and the resize kernel, on one thread and one stream.
#include "data_pipeline/gpu/gpu_decoder.h"

#include <nvjpeg.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>

#include "data_pipeline/augment.h"
#include "data_pipeline/cuda_check.h"
#include "data_pipeline/data_error.h"
#include "data_pipeline/gpu/cuda_resources.h"
#include "data_pipeline/gpu/resize_normalize.h"
#include "data_pipeline/host_block.h"
#include "data_pipeline/nvtx_domain.h"
#include "data_pipeline/sample_reader.h"

namespace data_pipeline::gpu {

namespace {

const char* nvjpeg_status_name(nvjpegStatus_t s) {
  switch (s) {
    case NVJPEG_STATUS_SUCCESS:
      return "NVJPEG_STATUS_SUCCESS";
    case NVJPEG_STATUS_NOT_INITIALIZED:
      return "NVJPEG_STATUS_NOT_INITIALIZED";
    case NVJPEG_STATUS_INVALID_PARAMETER:
      return "NVJPEG_STATUS_INVALID_PARAMETER";
    case NVJPEG_STATUS_BAD_JPEG:
      return "NVJPEG_STATUS_BAD_JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED:
      return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE:
      return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case NVJPEG_STATUS_EXECUTION_FAILED:
      return "NVJPEG_STATUS_EXECUTION_FAILED";
    case NVJPEG_STATUS_ARCH_MISMATCH:
      return "NVJPEG_STATUS_ARCH_MISMATCH";
    case NVJPEG_STATUS_INTERNAL_ERROR:
      return "NVJPEG_STATUS_INTERNAL_ERROR";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED:
      return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM:
      return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM";
    default:
      return "unknown nvJPEG status";
  }
}

void nvjpeg_check(nvjpegStatus_t s, const char* call) {
  if (s != NVJPEG_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("nvJPEG call ") + call +
                             " failed: " + nvjpeg_status_name(s) + " (" +
                             std::to_string(static_cast<int>(s)) + ")");
  }
}
#define WORKLOAD_NVJPEG_CHECK(call) nvjpeg_check((call), #call)

// Owners of nvJPEG objects: the library handle, a decoder state, a parsed-stream handle and a
// decode-parameter set. Destroyed in reverse order of creation by Engine.
template <typename T, nvjpegStatus_t (*Destroy)(T)>
class NvjpegObject {
 public:
  NvjpegObject() = default;
  explicit NvjpegObject(T raw) : raw_(raw) {}
  ~NvjpegObject() {
    if (raw_) Destroy(raw_);
  }
  NvjpegObject(NvjpegObject&& o) noexcept : raw_(std::exchange(o.raw_, nullptr)) {}
  NvjpegObject& operator=(NvjpegObject&& o) noexcept {
    if (this != &o) {
      if (raw_) Destroy(raw_);
      raw_ = std::exchange(o.raw_, nullptr);
    }
    return *this;
  }
  NvjpegObject(const NvjpegObject&) = delete;
  NvjpegObject& operator=(const NvjpegObject&) = delete;
  T get() const { return raw_; }

 private:
  T raw_ = nullptr;
};
using NvjpegHandle = NvjpegObject<nvjpegHandle_t, nvjpegDestroy>;
using NvjpegState = NvjpegObject<nvjpegJpegState_t, nvjpegJpegStateDestroy>;
using NvjpegStream = NvjpegObject<nvjpegJpegStream_t, nvjpegJpegStreamDestroy>;
using NvjpegParams = NvjpegObject<nvjpegDecodeParams_t, nvjpegDecodeParamsDestroy>;

constexpr std::size_t kAlign = 256;
std::size_t align_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

std::string version_string() {
  int major = 0, minor = 0, patch = 0;
  if (nvjpegGetProperty(MAJOR_VERSION, &major) != NVJPEG_STATUS_SUCCESS) return "unknown";
  nvjpegGetProperty(MINOR_VERSION, &minor);
  nvjpegGetProperty(PATCH_LEVEL, &patch);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The output buffers: a fixed pool of device batches, each free, written by the stage, or leased
// to the consumer. A released buffer keeps its consumer's fence; the stage calls it before
// writing the buffer again. Thread-safe.

class OutputPool {
 public:
  OutputPool(int slots, std::int64_t batch_size, int image_size, bool float32, bool planar,
             int device)
      : planar_(planar) {
    const auto dtype = float32 ? torch::kFloat32 : torch::kUInt8;
    const torch::Device dev(torch::kCUDA, static_cast<c10::DeviceIndex>(device));
    for (int i = 0; i < slots; ++i) {
      Slot s;
      const std::vector<std::int64_t> shape =
          planar ? std::vector<std::int64_t>{batch_size, 3, image_size, image_size}
                 : std::vector<std::int64_t>{batch_size, image_size, image_size, 3};
      s.images = torch::empty(shape, torch::TensorOptions().dtype(dtype).device(dev));
      s.labels =
          torch::empty({batch_size}, torch::TensorOptions().dtype(torch::kInt64).device(dev));
      s.ready = std::make_unique<CudaEvent>();
      slots_.push_back(std::move(s));
    }
  }

  ~OutputPool() {
    // The device may still read released buffers: wait before the memory goes.
    for (auto& s : slots_) {
      if (s.fence) {
        try {
          s.fence();
        } catch (...) {
        }
      }
    }
  }

  /// Blocks for a free buffer and waits its fence (outside the lock); -1 once stopped.
  int acquire() {
    ReuseFence fence;
    int slot = -1;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        if (stopping_) return true;
        for (std::size_t i = 0; i < slots_.size(); ++i) {
          if (!slots_[i].busy) return true;
        }
        return false;
      });
      if (stopping_) return -1;
      for (std::size_t i = 0; i < slots_.size(); ++i) {
        if (!slots_[i].busy) {
          slot = static_cast<int>(i);
          break;
        }
      }
      slots_[static_cast<std::size_t>(slot)].busy = true;
      fence = std::move(slots_[static_cast<std::size_t>(slot)].fence);
      slots_[static_cast<std::size_t>(slot)].fence = nullptr;
    }
    if (fence) {
      nvtx::ScopedRange range(nvtx::kReuseFence);
      fence();
    }
    return slot;
  }

  void release(int slot, ReuseFence fence) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& s = slots_[static_cast<std::size_t>(slot)];
      s.busy = false;
      s.fence = std::move(fence);
    }
    cv_.notify_all();
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
  }

  const torch::Tensor& images(int slot) const {
    return slots_[static_cast<std::size_t>(slot)].images;
  }
  const torch::Tensor& labels(int slot) const {
    return slots_[static_cast<std::size_t>(slot)].labels;
  }
  CudaEvent& ready(int slot) { return *slots_[static_cast<std::size_t>(slot)].ready; }
  /// The first `n` images of a buffer as N x 3 x S x S (channels_last or contiguous NCHW).
  torch::Tensor batch_view(int slot, std::int64_t n) const {
    const torch::Tensor first = images(slot).narrow(0, 0, n);
    return planar_ ? first : first.permute({0, 3, 1, 2});
  }

 private:
  struct Slot {
    torch::Tensor images;  // N x S x S x 3
    torch::Tensor labels;
    std::unique_ptr<CudaEvent> ready;
    bool busy = false;
    ReuseFence fence;
  };
  bool planar_ = false;  // buffers are N x 3 x S x S (NCHW), else N x S x S x 3
  std::vector<Slot> slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

// ---------------------------------------------------------------------------------------------
// DeviceBatch

DeviceBatch::~DeviceBatch() { release(); }

DeviceBatch::DeviceBatch(DeviceBatch&& other) noexcept { *this = std::move(other); }

DeviceBatch& DeviceBatch::operator=(DeviceBatch&& other) noexcept {
  if (this != &other) {
    release();
    BatchInfo::operator=(std::move(other));
    pool_ = std::move(other.pool_);
    slot_ = other.slot_;
    images_ = std::move(other.images_);
    labels_ = std::move(other.labels_);
    ready_ = other.ready_;
    hardware_images_ = other.hardware_images_;
  }
  return *this;
}

void DeviceBatch::release() { release_after(nullptr); }

void DeviceBatch::release_after(ReuseFence fence) {
  if (!pool_) return;
  images_ = torch::Tensor();
  labels_ = torch::Tensor();
  pool_->release(slot_, std::move(fence));
  pool_.reset();
}

// ---------------------------------------------------------------------------------------------
// Engine: nvJPEG and the stage's CUDA resources. Used by the stage's thread only (after
// construction).

struct GpuDecoder::Engine {
  // One hardware batch in flight: its decoder state, its buffers, and the event after the last
  // work that reads them.
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

  NvjpegHandle handle;
  NvjpegStream parsed;  // header parsing for SupportedEx
  CudaStream stream;
  std::vector<DecodeSet> sets;
  std::size_t next_set = 0;
  std::unique_ptr<SampleReader> reader;  // the stage's CPU fallback
  // Per-batch scratch of the thread.
  std::vector<const unsigned char*> data;
  std::vector<std::size_t> lengths;
  std::vector<nvjpegImage_t> outputs;
  std::vector<nvjpegDecodeParams_t> params;
  std::vector<int> hardware;
};

GpuDecoder::GpuDecoder(std::shared_ptr<const Food101Index> index, LoaderOptions options,
                       GpuDecodeOptions gpu)
    : options_(std::move(options)), gpu_(gpu) {
  validate(options_);
  if (gpu_.decode_sets < 1)
    throw std::invalid_argument("GpuDecodeOptions.decode_sets: expected >= 1");
  if (gpu_.output_batches < 2) {
    throw std::invalid_argument("GpuDecodeOptions.output_batches: expected >= 2");
  }
  WORKLOAD_CUDA_CHECK(cudaSetDevice(gpu_.device));
  engine_ = std::make_unique<Engine>();
  info_.nvjpeg_version = version_string();
  if (gpu_.use_engines) {
    nvjpegHandle_t raw = nullptr;
    const nvjpegStatus_t s =
        nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, NVJPEG_FLAGS_DEFAULT, &raw);
    if (s == NVJPEG_STATUS_SUCCESS) {
      engine_->handle = NvjpegHandle(raw);
      info_.hardware = true;
      unsigned engines = 0, cores = 0;
      if (nvjpegGetHardwareDecoderInfo(raw, &engines, &cores) == NVJPEG_STATUS_SUCCESS) {
        info_.engines = engines;
        info_.cores_per_engine = cores;
      }
    } else if (s == NVJPEG_STATUS_ARCH_MISMATCH || s == NVJPEG_STATUS_JPEG_NOT_SUPPORTED ||
               s == NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED) {
      info_.notice = std::string("--decode gpu: this GPU has no hardware JPEG decoder (") +
                     nvjpeg_status_name(s) +
                     "): every image is decoded by the loader threads on the CPU path and copied "
                     "to the device";
    } else {
      nvjpeg_check(s, "nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE)");
    }
  } else {
    info_.notice =
        "--decode gpu without the JPEG engines (use_engines=false): every image takes "
        "the CPU path";
  }
  const std::int64_t b = options_.batch_size;
  if (info_.hardware) {
    Engine& e = *engine_;
    nvjpegJpegStream_t raw_stream = nullptr;
    WORKLOAD_NVJPEG_CHECK(nvjpegJpegStreamCreate(e.handle.get(), &raw_stream));
    e.parsed = NvjpegStream(raw_stream);
    for (int i = 0; i < gpu_.decode_sets; ++i) {
      Engine::DecodeSet set;
      nvjpegJpegState_t raw_state = nullptr;
      WORKLOAD_NVJPEG_CHECK(nvjpegJpegStateCreate(e.handle.get(), &raw_state));
      set.state = NvjpegState(raw_state);
      // Internal buffers allocated once, for Food-101-sized images (they grow if needed).
      WORKLOAD_NVJPEG_CHECK(nvjpegDecodeBatchedPreAllocate(e.handle.get(), raw_state,
                                                           static_cast<int>(b), 512, 512,
                                                           NVJPEG_CSS_444, NVJPEG_OUTPUT_RGBI));
      for (std::int64_t k = 0; k < b; ++k) {
        nvjpegDecodeParams_t p = nullptr;
        WORKLOAD_NVJPEG_CHECK(nvjpegDecodeParamsCreate(e.handle.get(), &p));
        set.params.emplace_back(p);
        WORKLOAD_NVJPEG_CHECK(nvjpegDecodeParamsSetOutputFormat(p, NVJPEG_OUTPUT_RGBI));
      }
      set.jobs = DeviceMemory(sizeof(CropJob) * static_cast<std::size_t>(b));
      set.jobs_host = HostBlock(sizeof(CropJob) * static_cast<std::size_t>(b), true);
      set.labels_host = HostBlock(sizeof(std::int64_t) * static_cast<std::size_t>(b), true);
      e.sets.push_back(std::move(set));
    }
  } else {
    Engine::DecodeSet set;
    set.labels_host = HostBlock(sizeof(std::int64_t) * static_cast<std::size_t>(b), true);
    engine_->sets.push_back(std::move(set));
  }
  pool_ =
      std::make_shared<OutputPool>(gpu_.output_batches, b, options_.transform.image_size,
                                   options_.transform.dtype == HostDType::kFloat32,
                                   options_.transform.layout == ImageLayout::kNchw, gpu_.device);
  LoaderOptions lo = options_;
  lo.decode = info_.hardware ? DecodeDevice::kGpu : DecodeDevice::kCpu;
  lo.pin_memory = true;  // the stage copies from the ring
  engine_->reader = std::make_unique<SampleReader>(index, lo);
  loader_ = std::make_unique<Loader>(std::move(index), lo);
  thread_ = std::thread([this] { stage_main(); });
}

GpuDecoder::~GpuDecoder() { stop(); }

void GpuDecoder::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_cv_.notify_all();
  if (loader_) loader_->cancel();  // wakes a stage blocked in Loader::next()
  if (pool_) pool_->stop();        // or in OutputPool::acquire()
  if (thread_.joinable()) thread_.join();
  std::deque<Item> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dropped.swap(queue_);
  }
  dropped.clear();
  if (loader_) loader_->stop();
  if (engine_) {
    try {
      engine_->stream.synchronize();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warning: GPU decode stage: %s\n", e.what());
    }
  }
}

void GpuDecoder::cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  ready_cv_.notify_all();
  loader_->cancel();
}

void GpuDecoder::reset() {
  std::deque<Item> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    traversal_epoch_ = (last_taken_epoch_ >= 0 ? last_taken_epoch_ : traversal_epoch_) + 1;
    reset_epoch_ = traversal_epoch_;
    last_taken_epoch_ = -1;
    ++generation_;
    dropped.swap(queue_);
  }
  ready_cv_.notify_all();
  dropped.clear();  // returns their buffers
}

GpuDecodeStats GpuDecoder::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

void GpuDecoder::count_fallback(const std::string& reason, std::int64_t images) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.fallback_images += images;
  stats_.fallback_reasons[reason] += images;
}

DeviceBatch GpuDecoder::next() {
  const auto started = std::chrono::steady_clock::now();
  Item item;
  {
    std::unique_lock<std::mutex> lock(mu_);
    ready_cv_.wait(lock, [&] { return cancelled_ || stopping_ || failure_ || !queue_.empty(); });
    if (cancelled_) throw Cancelled();
    if (!queue_.empty()) {
      item = std::move(queue_.front());
      queue_.pop_front();
    } else if (failure_) {
      std::rethrow_exception(failure_);
    } else {
      throw std::logic_error("GpuDecoder::next after stop()");
    }
    if (item.error) {
      failure_ = item.error;
      std::rethrow_exception(item.error);
    }
    last_taken_epoch_ = item.batch.epoch();
  }
  item.batch.wait_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now() - started);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.consumer_wait += item.batch.wait_;
  }
  return std::move(item.batch);
}

void GpuDecoder::stage_main() {
  nvtx::name_current_thread(nvtx::kGpuStageThread);
  Engine& e = *engine_;
  const std::int64_t s = options_.transform.image_size;
  const bool float32 = options_.transform.dtype == HostDType::kFloat32;
  ResizeOutput out_desc;
  out_desc.size = static_cast<int>(s);
  out_desc.float32 = float32;
  out_desc.planar = options_.transform.layout == ImageLayout::kNchw;
  for (int c = 0; c < 3; ++c) {
    out_desc.mean[c] = kImageNetMean[static_cast<std::size_t>(c)];
    out_desc.std[c] = kImageNetStd[static_cast<std::size_t>(c)];
  }
  const std::size_t sample_bytes = data_pipeline::sample_bytes(options_.transform);
  std::uint64_t handled_generation = 0;
  try {
    WORKLOAD_CUDA_CHECK(cudaSetDevice(gpu_.device));
    for (;;) {
      std::uint64_t generation = 0;
      std::optional<std::int64_t> reset_to;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;
        generation = generation_;
        if (generation != handled_generation) reset_to = reset_epoch_;
      }
      if (reset_to) {
        loader_->reset_to(*reset_to);
        handled_generation = generation;
      }
      Batch host = loader_->next();
      const int slot = pool_->acquire();
      if (slot < 0) return;  // stopping

      DeviceBatch batch;
      batch.pool_ = pool_;
      batch.slot_ = slot;
      // The loader's batch information moves over; `host` keeps its lease (and size) until the
      // batch's work no longer reads its slot.
      static_cast<BatchInfo&>(batch) = std::move(static_cast<BatchInfo&>(host));
      const std::int64_t n = host.size();
      auto* out_images = static_cast<std::uint8_t*>(pool_->images(slot).data_ptr());
      auto* out_labels = pool_->labels(slot).data_ptr<std::int64_t>();

      // The set whose buffers this batch decodes into: wait for its previous batch's work on the
      // host (the engines ignore stream order), then reuse its buffers.
      Engine::DecodeSet& set = e.sets[e.next_set++ % e.sets.size()];
      {
        nvtx::ScopedRange range(nvtx::kReuseFence);
        set.done.synchronize();
      }
      auto* labels_host = static_cast<std::int64_t*>(set.labels_host.data());
      std::memcpy(labels_host, host.labels().data_ptr<std::int64_t>(),
                  static_cast<std::size_t>(n) * sizeof(std::int64_t));

      std::vector<int>& hardware = e.hardware;
      hardware.clear();
      std::vector<std::pair<int, std::string>> redo;  // decoded here on the CPU, and why
      if (info_.hardware) {
        nvtx::ScopedRange range(nvtx::kGpuDecode);
        for (std::int64_t k = 0; k < n; ++k) {
          const StagedImage& st = batch.staged_[static_cast<std::size_t>(k)];
          if (st.route != DecodeRoute::kHardware) {
            count_fallback(st.reason, 1);
            continue;
          }
          nvjpegDecodeParams_t p = set.params[static_cast<std::size_t>(hardware.size())].get();
          const CropRect& c = st.params.crop;
          WORKLOAD_NVJPEG_CHECK(nvjpegDecodeParamsSetROI(p, c.x, c.y, c.width, c.height));
          int unsupported = 1;
          const std::uint8_t* bytes = st.bytes(host.sample_area(k));
          if (nvjpegJpegStreamParseHeader(e.handle.get(), bytes, st.size, e.parsed.get()) ==
                  NVJPEG_STATUS_SUCCESS &&
              nvjpegDecodeBatchedSupportedEx(e.handle.get(), e.parsed.get(), p, &unsupported) ==
                  NVJPEG_STATUS_SUCCESS &&
              unsupported == 0) {
            hardware.push_back(static_cast<int>(k));
          } else {
            redo.emplace_back(static_cast<int>(k), "refused by nvjpegDecodeBatchedSupportedEx");
            std::lock_guard<std::mutex> lock(stats_mu_);
            ++stats_.refused_images;
          }
        }
        // Where each crop and its rows go in the set's buffers.
        std::size_t decoded_bytes = 0, scratch_bytes_total = 0;
        auto* jobs = static_cast<CropJob*>(set.jobs_host.data());
        for (std::size_t i = 0; i < hardware.size(); ++i) {
          const StagedImage& st = batch.staged_[static_cast<std::size_t>(hardware[i])];
          const CropRect& c = st.params.crop;
          CropJob& job = jobs[i];
          job.source = decoded_bytes;
          job.scratch = scratch_bytes_total;
          job.width = c.width;
          job.height = c.height;
          job.sample = hardware[i];
          job.flip = st.params.flip ? 1 : 0;
          decoded_bytes += align_up(static_cast<std::size_t>(c.width) * c.height * 3);
          scratch_bytes_total += align_up(gpu::scratch_bytes(c.height, static_cast<int>(s)));
        }
        if (!hardware.empty()) {
          set.decoded.reserve(decoded_bytes);
          set.scratch.reserve(scratch_bytes_total);
          const int m = static_cast<int>(hardware.size());
          e.data.resize(hardware.size());
          e.lengths.resize(hardware.size());
          e.outputs.assign(hardware.size(), nvjpegImage_t{});
          e.params.resize(hardware.size());
          for (std::size_t i = 0; i < hardware.size(); ++i) {
            const StagedImage& st = batch.staged_[static_cast<std::size_t>(hardware[i])];
            e.data[i] = st.bytes(host.sample_area(hardware[i]));
            e.lengths[i] = st.size;
            e.outputs[i].channel[0] = set.decoded.data() + jobs[i].source;
            e.outputs[i].pitch[0] = static_cast<std::size_t>(jobs[i].width) * 3;
            e.params[i] = set.params[i].get();
          }
          nvjpegStatus_t status = NVJPEG_STATUS_SUCCESS;
          if (set.initialized_for != m) {
            status = nvjpegDecodeBatchedInitialize(e.handle.get(), set.state.get(), m, 1,
                                                   NVJPEG_OUTPUT_RGBI);
            set.initialized_for = status == NVJPEG_STATUS_SUCCESS ? m : 0;
          }
          if (status == NVJPEG_STATUS_SUCCESS) {
            status = nvjpegDecodeBatchedEx(e.handle.get(), set.state.get(), e.data.data(),
                                           e.lengths.data(), e.outputs.data(), e.params.data(),
                                           e.stream.get());
          }
          if (status != NVJPEG_STATUS_SUCCESS) {
            // The engine failed the batch: re-initialise next time, decode its images here.
            set.initialized_for = 0;
            {
              std::lock_guard<std::mutex> lock(stats_mu_);
              ++stats_.failed_batches;
            }
            for (int k : hardware) {
              redo.emplace_back(k, std::string("the hardware decoder failed its batch (") +
                                       nvjpeg_status_name(status) + ")");
            }
            hardware.clear();
          }
        }
      } else {
        count_fallback("no hardware JPEG decoder", n);
      }

      // The CPU path's pixels: written by the loader threads into the ring, or decoded here.
      for (std::int64_t k = 0; k < n; ++k) {
        if (info_.hardware &&
            batch.staged_[static_cast<std::size_t>(k)].route == DecodeRoute::kHardware) {
          continue;
        }
        WORKLOAD_CUDA_CHECK(cudaMemcpyAsync(out_images + static_cast<std::size_t>(k) * sample_bytes,
                                            host.sample_area(k), sample_bytes,
                                            cudaMemcpyHostToDevice, e.stream.get()));
      }
      if (!redo.empty()) {
        nvtx::ScopedRange range(nvtx::kDecodeFallback);
        if (set.pixels_host.size() == 0) {
          set.pixels_host =
              HostBlock(sample_bytes * static_cast<std::size_t>(options_.batch_size), true);
        }
        auto* pixels = static_cast<std::uint8_t*>(set.pixels_host.data());
        for (const auto& [k, reason] : redo) {
          std::uint8_t* dst = pixels + static_cast<std::size_t>(k) * sample_bytes;
          SampleResult r;
          try {
            // The CPU path on the original image, with the bad-image policy: what --decode cpu
            // makes of this sample.
            r = e.reader->read(batch.epoch(), batch.indices_[static_cast<std::size_t>(k)], dst);
          } catch (const DataError& err) {
            throw DataError("loader (batch " + std::to_string(batch.index_in_epoch()) +
                            " of epoch " + std::to_string(batch.epoch()) + ", sample " +
                            std::to_string(k) + ", GPU stage fallback): " + err.what());
          }
          labels_host[k] = r.label;
          if (r.skipped) {
            const bool known = std::any_of(batch.skipped_.begin(), batch.skipped_.end(),
                                           [&](const SkippedImage& s2) {
                                             return s2.dataset_index == r.skipped->dataset_index;
                                           });
            if (!known) batch.skipped_.push_back(std::move(*r.skipped));
          }
          count_fallback(reason, 1);
          WORKLOAD_CUDA_CHECK(
              cudaMemcpyAsync(out_images + static_cast<std::size_t>(k) * sample_bytes, dst,
                              sample_bytes, cudaMemcpyHostToDevice, e.stream.get()));
        }
      }
      WORKLOAD_CUDA_CHECK(cudaMemcpyAsync(out_labels, labels_host,
                                          static_cast<std::size_t>(n) * sizeof(std::int64_t),
                                          cudaMemcpyHostToDevice, e.stream.get()));
      if (!hardware.empty()) {
        nvtx::ScopedRange range(nvtx::kResizeNormalize);
        const int m = static_cast<int>(hardware.size());
        const auto* jobs = static_cast<const CropJob*>(set.jobs_host.data());
        const ResizeShape shape = resize_shape(jobs, m, static_cast<int>(s));
        set.taps.reserve(taps_bytes(shape, static_cast<int>(s)));
        WORKLOAD_CUDA_CHECK(cudaMemcpyAsync(set.jobs.data(), set.jobs_host.data(),
                                            sizeof(CropJob) * static_cast<std::size_t>(m),
                                            cudaMemcpyHostToDevice, e.stream.get()));
        out_desc.images = out_images;
        if (gpu_.before_resize) gpu_.before_resize(e.stream.get());
        resize_normalize(set.jobs.data<CropJob>(), shape, set.decoded.data(), set.taps.data<int>(),
                         set.scratch.data(), out_desc, e.stream.get());
      }
      set.done.record(e.stream.get());
      pool_->ready(slot).record(e.stream.get());
      batch.ready_ = pool_->ready(slot).get();
      batch.hardware_images_ = static_cast<std::int64_t>(hardware.size());
      batch.images_ = pool_->batch_view(slot, n);
      batch.labels_ = pool_->labels(slot).narrow(0, 0, n);
      {
        std::lock_guard<std::mutex> lock(stats_mu_);
        ++stats_.batches;
        stats_.hardware_images += batch.hardware_images_;
      }
      // The ring slot is read by this batch's copies and by the decoder's input transfers.
      auto consumed = std::make_shared<CudaEvent>();
      consumed->record(e.stream.get());
      host.release_after([consumed] { consumed->synchronize(); });

      std::lock_guard<std::mutex> lock(mu_);
      if (generation == generation_ && !stopping_) {
        queue_.push_back(Item{std::move(batch), nullptr});
        ready_cv_.notify_all();
      }
      // else: decoded for a traversal reset() abandoned; the batch returns its buffer here.
    }
  } catch (const Cancelled&) {
    // stop() or cancel(): nothing to report.
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Item{DeviceBatch{}, std::current_exception()});
    ready_cv_.notify_all();
  }
}

}  // namespace data_pipeline::gpu
