// The data pipeline's settings as plain types (no LibTorch or OpenCV), with their name tables.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/named_enum.h"
#include "data_pipeline/augment.h"
#include "data_pipeline/jpeg_decoder.h"

namespace data_pipeline {

/// Element type of the host batch buffers.
enum class HostDType {
  kFloat32,  ///< Normalised float32 (ToTensor + Normalize done on the host), the article's path.
  kUInt8,    ///< Raw 0..255 RGB; conversion and normalisation are left to the device.
};
inline constexpr common::EnumName<HostDType> kHostDTypeNames[] = {{HostDType::kFloat32, "float32"},
                                                                  {HostDType::kUInt8, "uint8"}};
constexpr const auto& enum_names(HostDType) { return kHostDTypeNames; }

/// Bytes per element of `dtype`.
inline std::size_t element_size(HostDType dtype) { return dtype == HostDType::kUInt8 ? 1 : 4; }

/// Memory layout of a batch's images (and of the model's activations: --memory-format).
enum class ImageLayout {
  kChannelsLast,  ///< N x H x W x C in memory (NHWC), the default: what Hopper's kernels prefer.
  kNchw,          ///< N x C x H x W: PyTorch's default contiguous layout.
};
inline constexpr common::EnumName<ImageLayout> kImageLayoutNames[] = {
    {ImageLayout::kNchw, "nchw"}, {ImageLayout::kChannelsLast, "channels_last"}};
constexpr const auto& enum_names(ImageLayout) { return kImageLayoutNames; }

/// What one worker claims at a time.
enum class WorkUnit {
  kBatch,   ///< A worker assembles a whole batch, as PyTorch's DataLoader workers do.
  kSample,  ///< All workers fill the next batch together, one sample at a time.
};
inline constexpr common::EnumName<WorkUnit> kWorkUnitNames[] = {{WorkUnit::kBatch, "batch"},
                                                                {WorkUnit::kSample, "sample"}};
constexpr const auto& enum_names(WorkUnit) { return kWorkUnitNames; }

/// What to do with an image that cannot be read or decoded.
enum class BadImagePolicy {
  kError,  ///< The batch fails; `Loader::next` throws a DataError naming the file.
  kSkip,   ///< Replace it with another image of the split, chosen deterministically.
};
inline constexpr common::EnumName<BadImagePolicy> kBadImagePolicyNames[] = {
    {BadImagePolicy::kError, "error"}, {BadImagePolicy::kSkip, "skip"}};
constexpr const auto& enum_names(BadImagePolicy) { return kBadImagePolicyNames; }

/// Where a batch's JPEGs are decoded (--decode).
enum class DecodeDevice {
  kCpu,  ///< Loader threads decode, augment and normalise into the host batch (the article's path).
  kGpu,  ///< Loader threads stage the compressed bytes and the crop; the GPU stage decodes them
         ///< on the hardware JPEG engines (data_pipeline/gpu/), the CPU path taking what they
         ///< cannot.
};
inline constexpr common::EnumName<DecodeDevice> kDecodeDeviceNames[] = {
    {DecodeDevice::kCpu, "cpu"}, {DecodeDevice::kGpu, "gpu"}};
constexpr const auto& enum_names(DecodeDevice) { return kDecodeDeviceNames; }

/// Smallest output size the transform accepts.
inline constexpr int kMinImageSize = 1;

/// Settings of the per-sample transform (`SampleTransform`).
struct TransformOptions {
  int image_size = 224;  ///< Output height and width, >= kMinImageSize.
  AugmentOptions augment;
  HostDType dtype = HostDType::kFloat32;
  DecodeMode decode_mode = DecodeMode::kFusedRoi;
  ImageLayout layout = ImageLayout::kChannelsLast;  ///< How a sample is written (HWC or CHW).
};

/// Bytes one transformed sample occupies in a batch buffer (image_size^2 x 3 elements).
inline std::size_t sample_bytes(const TransformOptions& options) {
  return static_cast<std::size_t>(options.image_size) *
         static_cast<std::size_t>(options.image_size) * 3 * element_size(options.dtype);
}

/// Default cap on an image file's size, in MiB (`LoaderOptions::max_image_mb`): far above any
/// photo's JPEG (Food-101's largest is under 1 MiB; a JPEG of kMaxImagePixels at high quality is
/// tens of MiB), far below what a sparse or runaway file would cost to read.
inline constexpr std::int64_t kDefaultMaxImageMb = 64;
/// Highest `max_image_mb` accepted: a file's bytes are held in memory, and OpenCV's decoders
/// index them with an int.
inline constexpr std::int64_t kMaxImageMbCeiling = 1024;

/// Loader settings. Defaults are the article's DataLoader settings.
struct LoaderOptions {
  std::int64_t batch_size = 128;
  int workers = 8;          ///< Worker threads; 0 decodes on the consumer thread inside next().
  int prefetch_factor = 2;  ///< Batches per worker decoded ahead (PyTorch's meaning).
  bool pin_memory = true;   ///< Page-locked slots when CUDA is present.
  WorkUnit work_unit = WorkUnit::kBatch;
  bool drop_last = true;
  bool shuffle = true;
  std::uint64_t seed = 2026;  ///< Keys the epoch order and every augmentation.
  TransformOptions transform;
  BadImagePolicy on_bad_image = BadImagePolicy::kError;
  /// Image files larger than this many MiB are refused before a byte is read, as bad images (the
  /// policy above decides), in [1, kMaxImageMbCeiling].
  std::int64_t max_image_mb = kDefaultMaxImageMb;
  /// kGpu: the loader's batches carry each image's compressed bytes, crop and flip
  /// (`Batch::staged`) for the GPU stage; only the images the engines cannot take are decoded
  /// into the batch's pixels.
  DecodeDevice decode = DecodeDevice::kCpu;
  /// Data parallelism, as PyTorch's DistributedSampler(shuffle=True, drop_last=False): every shard
  /// draws the same epoch order, pads it with its head to a multiple of shard_count, and takes
  /// every shard_count-th image from shard_index on. Batches are then made from the shard. 1 / 0:
  /// the whole split.
  int shard_count = 1;
  int shard_index = 0;
  /// false (evaluation): the shards are not padded, so no image is read twice in an epoch: shard i
  /// takes the positions i, i + shard_count, ... of the order that exist, and the shards' sizes
  /// differ by at most one (unpadded_shard_size).
  bool pad_shards = true;
};

/// `options.max_image_mb` in bytes.
inline std::uint64_t max_image_bytes(const LoaderOptions& options) {
  return static_cast<std::uint64_t>(options.max_image_mb) << 20;
}

/// Images in one shard of a split of `images`: ceil(images / shard_count).
inline std::int64_t shard_size(std::int64_t images, int shard_count) {
  return (images + shard_count - 1) / shard_count;
}

/// Images in shard `shard_index` of `images` without padding: those of the positions shard_index,
/// shard_index + shard_count, ... below `images`.
inline std::int64_t unpadded_shard_size(std::int64_t images, int shard_count, int shard_index) {
  return images > shard_index ? (images - shard_index + shard_count - 1) / shard_count : 0;
}

/// Images one epoch of `options`' loader reads from a split of `images`: its shard, padded or not.
inline std::int64_t epoch_images(std::int64_t images, const LoaderOptions& options) {
  return options.pad_shards ? shard_size(images, options.shard_count)
                            : unpadded_shard_size(images, options.shard_count, options.shard_index);
}

/// The invariants the transform and the loader rely on; the command line checks the same ranges
/// earlier, with its flags' names. \throws std::invalid_argument naming the field.
void validate(const TransformOptions& options);
void validate(const LoaderOptions& options);

}  // namespace data_pipeline
