// Opening nvJPEG's hardware decoder and creating the GPU decode stage's decode sets.
#include "data_pipeline/gpu/decode_resources.h"

#include <string>
#include <utility>

#include "data_pipeline/gpu/resize_normalize.h"
#include "data_pipeline/nvtx_domain.h"

namespace data_pipeline::gpu {

GpuDecodeInfo open_hardware_decoder(bool use_engines, NvjpegHandle& handle) {
  GpuDecodeInfo info;
  info.nvjpeg_version = nvjpeg_version();
  if (!use_engines) {
    info.notice =
        "--decode gpu without the JPEG engines (use_engines=false): every image takes "
        "the CPU path";
    return info;
  }
  nvjpegHandle_t raw = nullptr;
  const nvjpegStatus_t s =
      nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, NVJPEG_FLAGS_DEFAULT, &raw);
  if (s == NVJPEG_STATUS_SUCCESS) {
    handle = NvjpegHandle(raw);
    info.hardware = true;
    unsigned engines = 0, cores = 0;
    if (nvjpegGetHardwareDecoderInfo(raw, &engines, &cores) == NVJPEG_STATUS_SUCCESS) {
      info.engines = engines;
      info.cores_per_engine = cores;
    }
  } else if (s == NVJPEG_STATUS_ARCH_MISMATCH || s == NVJPEG_STATUS_JPEG_NOT_SUPPORTED ||
             s == NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED) {
    info.notice = std::string("--decode gpu: this GPU has no hardware JPEG decoder (") +
                  nvjpeg_status_name(s) +
                  "): every image is decoded by the loader threads on the CPU path and copied "
                  "to the device";
  } else {
    nvjpeg_check(s, "nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE)");
  }
  return info;
}

void DecodeResources::create_sets(bool hardware, int count, std::int64_t batch_size) {
  const auto b = static_cast<std::size_t>(batch_size);
  if (!hardware) {
    DecodeSet set;
    set.labels_host = HostBlock(sizeof(std::int64_t) * b, true);
    sets.push_back(std::move(set));
    return;
  }
  nvjpegJpegStream_t raw_stream = nullptr;
  WORKLOAD_NVJPEG_CHECK(nvjpegJpegStreamCreate(handle.get(), &raw_stream));
  parsed = NvjpegStream(raw_stream);
  for (int i = 0; i < count; ++i) {
    DecodeSet set;
    nvjpegJpegState_t raw_state = nullptr;
    WORKLOAD_NVJPEG_CHECK(nvjpegJpegStateCreate(handle.get(), &raw_state));
    set.state = NvjpegState(raw_state);
    // Internal buffers allocated once, for Food-101-sized images (they grow if needed).
    WORKLOAD_NVJPEG_CHECK(nvjpegDecodeBatchedPreAllocate(handle.get(), raw_state,
                                                         static_cast<int>(batch_size), 512, 512,
                                                         NVJPEG_CSS_444, NVJPEG_OUTPUT_RGBI));
    for (std::size_t k = 0; k < b; ++k) {
      nvjpegDecodeParams_t p = nullptr;
      WORKLOAD_NVJPEG_CHECK(nvjpegDecodeParamsCreate(handle.get(), &p));
      set.params.emplace_back(p);
      WORKLOAD_NVJPEG_CHECK(nvjpegDecodeParamsSetOutputFormat(p, NVJPEG_OUTPUT_RGBI));
    }
    set.jobs = DeviceMemory(sizeof(CropJob) * b);
    set.jobs_host = HostBlock(sizeof(CropJob) * b, true);
    set.labels_host = HostBlock(sizeof(std::int64_t) * b, true);
    sets.push_back(std::move(set));
  }
}

DecodeResources::DecodeSet& DecodeResources::reuse_next_set() {
  DecodeSet& set = sets[next_set++ % sets.size()];
  {
    nvtx::ScopedRange range(nvtx::kReuseFence);
    set.done.synchronize();
  }
  return set;
}

}  // namespace data_pipeline::gpu
