// The GPU decode stage's resize kernel: torchvision's RandomResizedCrop resize on PIL images
// (Pillow's antialiased bilinear, two 8-bit passes), then the flip, ToTensor + Normalize or the raw
// bytes, written into a channels-last batch. Plain CUDA: no LibTorch in this header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace data_pipeline::gpu {

/// One decoded crop to resize into the batch.
struct CropJob {
  std::uint64_t source =
      0;  ///< Byte offset of the crop's interleaved RGB pixels (width * 3 pitch).
  std::uint64_t scratch = 0;  ///< Byte offset of its horizontally resized rows (height x size x 3).
  int width = 0;              ///< The crop's size in pixels.
  int height = 0;
  int sample = 0;  ///< Index of the output sample.
  int flip = 0;    ///< Mirror the output horizontally.
};

/// What the kernel writes.
struct ResizeOutput {
  void* images = nullptr;  ///< N x size x size x 3 (NHWC), or N x 3 x size x size when planar.
  int size = 0;
  bool planar = false;  ///< NCHW (--memory-format nchw).
  bool float32 = true;  ///< (v / 255 - mean) / std per channel, as ToTensor + Normalize; else v.
  float mean[3] = {0, 0, 0};
  float std[3] = {1, 1, 1};
};

/// Bytes of scratch one job needs: its rows resized horizontally.
inline std::uint64_t scratch_bytes(int crop_height, int size) {
  return static_cast<std::uint64_t>(crop_height) * static_cast<std::uint64_t>(size) * 3;
}

/// The batch-wide sizes of one launch, from its jobs (host side).
struct ResizeShape {
  int count = 0;       ///< Jobs.
  int max_height = 0;  ///< The tallest crop.
  int max_taps = 0;    ///< The most filter taps any output pixel of any job reads, on either axis.
};
/// The shape of `count` jobs of output size `size` (reads the jobs in host memory).
ResizeShape resize_shape(const CropJob* jobs, int count, int size);
/// Bytes of the weight table a launch of that shape needs: per job, per output row and column,
/// the first tap, the tap count and the fixed-point weights.
std::uint64_t taps_bytes(const ResizeShape& shape, int size);

/// Enqueues the resize on `stream` for `shape.count` jobs (`jobs` in device memory): a kernel that
/// computes every job's filter weights once into `taps` (taps_bytes), then the horizontal pass into
/// `scratch` and the vertical pass into `out.images`. Each output pixel is byte-identical to
/// data_pipeline::resize_reference (Pillow) on the same crop, then flipped and converted as `out`
/// says. Asynchronous; reads `sources` and `jobs`, writes `taps`, `scratch` and `out.images`.
/// \throws std::runtime_error when a launch fails.
void resize_normalize(const CropJob* jobs, const ResizeShape& shape, const std::uint8_t* sources,
                      int* taps, std::uint8_t* scratch, const ResizeOutput& out,
                      cudaStream_t stream);

}  // namespace data_pipeline::gpu
