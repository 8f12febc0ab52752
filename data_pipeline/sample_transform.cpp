// One sample end to end: file bytes -> fused ROI decode -> resize -> flip -> normalise -> NHWC
// slot.
#include "data_pipeline/sample_transform.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/imgproc.hpp>
#include <string>

#include "common/hash64.h"
#include "data_pipeline/data_error.h"

#if defined(WORKLOAD_HAVE_IMGCODECS)
#include <opencv2/imgcodecs.hpp>
#endif

namespace data_pipeline {

namespace {
// What a file that is not regular is, for the error.
const char* file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a file of another type";
}

// `bytes` in MiB, with one decimal when not a whole number.
std::string mib(std::uint64_t bytes) {
  char text[32];
  if (bytes % (std::uint64_t{1} << 20) == 0) {
    std::snprintf(text, sizeof(text), "%llu", static_cast<unsigned long long>(bytes >> 20));
  } else {
    std::snprintf(text, sizeof(text), "%.1f", static_cast<double>(bytes) / (1 << 20));
  }
  return std::string(text) + " MiB";
}
}  // namespace

void read_file(const std::string& path, std::vector<std::uint8_t>& buffer,
               std::uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever (issue 21).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw DataError(path + ": cannot open: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw DataError(path + ": cannot stat: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw DataError(path + ": expected an image file, got a directory");
  if (!S_ISREG(st.st_mode)) {
    throw DataError(path + ": expected a regular file, got " + file_kind(st.st_mode));
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes) {
    throw DataError(path + ": expected an image file of at most " + std::to_string(max_bytes) +
                    " bytes (" + mib(max_bytes) + ", --max-image-mb raises it), got " +
                    std::to_string(size) + " bytes (" + mib(size) + ")");
  }
  // Reads of a regular file may wait for the disk; clear the flag so that no filesystem that
  // honours it there turns a slow read into EAGAIN.
  if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    throw DataError(path + ": cannot set blocking reads: " + std::strerror(errno));
  }
  buffer.resize(static_cast<std::size_t>(size));
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, buffer.data() + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw DataError(path + ": read error: " + std::strerror(errno));
    }
    if (n == 0) break;  // the file shrank under us: treat what we have as the file
    done += static_cast<std::size_t>(n);
  }
  buffer.resize(done);
}

namespace {
// Process-wide OpenCV settings for decoding untrusted files, applied once: OpenCV's codecs report
// through our DataError rather than by logging to stderr, and refuse images above the JPEG
// decoder's own cap (kMaxImagePixels) unless the user set OPENCV_IO_MAX_IMAGE_PIXELS.
void configure_opencv_once() {
  static const bool done = [] {
    setenv("OPENCV_IO_MAX_IMAGE_PIXELS", std::to_string(kMaxImagePixels).c_str(),
           /*overwrite=*/0);
    cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
    return true;
  }();
  (void)done;
}
}  // namespace

SampleTransform::SampleTransform(TransformOptions options) : options_(options) {
  validate(options_);
  configure_opencv_once();
  for (int c = 0; c < 3; ++c) {
    for (int v = 0; v < 256; ++v) {
      // Same float32 operations, in the same order, as ToTensor (v / 255) then Normalize.
      const float x = static_cast<float>(v) / 255.0f;
      lut_[c][v] = (x - kImageNetMean[c]) / kImageNetStd[c];
    }
  }
}

bool SampleTransform::has_fallback_decoder() {
#if defined(WORKLOAD_HAVE_IMGCODECS)
  return true;
#else
  return false;
#endif
}

namespace {
using Clock = std::chrono::steady_clock;

// Nanoseconds from `since` to now; moves `since` to now, so consecutive laps tile the call.
std::int64_t lap(Clock::time_point& since) {
  const Clock::time_point now = Clock::now();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - since).count();
  since = now;
  return static_cast<std::int64_t>(ns);
}

struct ChooserContext {
  CounterRng* rng = nullptr;
  const AugmentOptions* options = nullptr;
  AugmentParams params;
};
CropRect choose_crop(void* context, int width, int height) {
  auto* ctx = static_cast<ChooserContext*>(context);
  ctx->params = sample_augment(*ctx->rng, width, height, *ctx->options);
  return ctx->params.crop;
}
}  // namespace

std::uint64_t SampleTransform::apply_file(const std::string& path, CounterRng& rng, void* dst,
                                          DecodeInfo* info, TransformTimes* times,
                                          std::uint64_t max_bytes) {
  if (!times) {
    read_file(path, file_buffer_, max_bytes);
    return apply(file_buffer_.data(), file_buffer_.size(), path, rng, dst, info);
  }
  Clock::time_point t = Clock::now();
  read_file(path, file_buffer_, max_bytes);
  const std::int64_t read_ns = lap(t);
  const std::uint64_t digest =
      apply(file_buffer_.data(), file_buffer_.size(), path, rng, dst, info, times);
  times->read_ns = read_ns;
  return digest;
}

std::uint64_t SampleTransform::apply(const std::uint8_t* data, std::size_t size,
                                     const std::string& name, CounterRng& rng, void* dst,
                                     DecodeInfo* info, TransformTimes* times) {
  Clock::time_point t;
  if (times) {
    *times = TransformTimes{};
    t = Clock::now();
  }
  if (size == 0) throw DataError(name + ": empty file (0 bytes)");
  const int s = options_.image_size;
  RgbView view;
  AugmentParams params;
  if (JpegDecoder::looks_like_jpeg(data, size)) {
    ChooserContext ctx{&rng, &options_.augment, {}};
    view = decoder_.decode(data, size, name, choose_crop, &ctx, s, s, options_.decode_mode, info);
    params = ctx.params;
  } else {
    view = decode_other(data, size, name, rng, params, info);
  }
  if (times) times->decode_ns = lap(t);
  return write(view, params.flip, dst, times);
}

namespace {

// The first bytes of a file, "XX XX XX XX", for a message.
std::string head_bytes(const std::uint8_t* data, std::size_t size) {
  char head[32];
  std::snprintf(head, sizeof(head), "%02X %02X %02X %02X", size > 0 ? data[0] : 0,
                size > 1 ? data[1] : 0, size > 2 ? data[2] : 0, size > 3 ? data[3] : 0);
  return head;
}

#if defined(WORKLOAD_HAVE_IMGCODECS)
bool starts_with(const std::uint8_t* data, std::size_t size, const char* magic, std::size_t n,
                 std::size_t at = 0) {
  return size >= at + n && std::memcmp(data + at, magic, n) == 0;
}

// The formats the fallback decodes, by their signatures: PNG, BMP, WebP, TIFF and PNM, a photo
// data set's other formats. OpenCV's imdecode would try any codec its build has, and Debian's
// reaches GDCM for a DICOM signature, whose reader asserts (aborts the process) on a malformed one
// (a 132-byte input the fuzzer found). Everything else is a DataError before OpenCV sees it.
bool fallback_format(const std::uint8_t* data, std::size_t size) {
  return starts_with(data, size, "\x89PNG\r\n\x1a\n", 8) || starts_with(data, size, "BM", 2) ||
         (starts_with(data, size, "RIFF", 4) && starts_with(data, size, "WEBP", 4, 8)) ||
         starts_with(data, size, "II*\0", 4) || starts_with(data, size, "MM\0*", 4) ||
         (size >= 2 && data[0] == 'P' && data[1] >= '1' && data[1] <= '6');
}
#endif

}  // namespace

RgbView SampleTransform::decode_other(const std::uint8_t* data, std::size_t size,
                                      const std::string& name, CounterRng& rng,
                                      AugmentParams& params, DecodeInfo* info) {
#if defined(WORKLOAD_HAVE_IMGCODECS)
  if (!fallback_format(data, size)) {
    throw DataError(name + ": cannot decode: not a JPEG, PNG, BMP, WebP, TIFF or PNM file" +
                    " (starts with " + head_bytes(data, size) + ")");
  }
  const cv::Mat encoded(1, static_cast<int>(size), CV_8UC1, const_cast<std::uint8_t*>(data));
  cv::Mat bgr;
  try {
    bgr = cv::imdecode(encoded, cv::IMREAD_COLOR);
  } catch (const cv::Exception& e) {
    throw DataError(name + ": cannot decode image: " + e.what());
  }
  if (bgr.empty()) {
    throw DataError(name + ": cannot decode: neither JPEG nor a format OpenCV can read");
  }
  cv::cvtColor(bgr, other_rgb_, cv::COLOR_BGR2RGB);
  params = sample_augment(rng, other_rgb_.cols, other_rgb_.rows, options_.augment);
  const CropRect& c = params.crop;
  if (info) {
    *info = DecodeInfo{};
    info->image_width = other_rgb_.cols;
    info->image_height = other_rgb_.rows;
    info->crop = c;
  }
  RgbView view;
  view.data = other_rgb_.ptr<std::uint8_t>(c.y) + static_cast<std::size_t>(c.x) * 3;
  view.width = c.width;
  view.height = c.height;
  view.stride = other_rgb_.step[0];
  return view;
#else
  (void)rng;
  (void)params;
  (void)info;
  throw DataError(name + ": not a JPEG file (starts with " + head_bytes(data, size) +
                  ") and this build has no OpenCV imgcodecs to decode other formats");
#endif
}

int resize_interpolation(int width, int height, int size) {
  // Up to 2x, bilinear sampling reads every source pixel (at exactly 2x it is the 2x2 box
  // average); beyond that it would skip pixels and alias, so area averaging takes over. The fused
  // decode leaves less than 2x for the resize except past the 1/8 DCT scale.
  return (width > 2 * size || height > 2 * size) ? cv::INTER_AREA : cv::INTER_LINEAR;
}

namespace {

using Lut = float[3][256];

// The resized image's rows into three planes, C x H x W: the same values as the HWC writers
// below, transposed. `dst` holds float (normalised through lut) or uint8.
void write_planes(const cv::Mat& resized, int s, bool flip, HostDType dtype, const Lut& lut,
                  void* dst) {
  const std::size_t plane = static_cast<std::size_t>(s) * static_cast<std::size_t>(s);
  for (int y = 0; y < s; ++y) {
    const std::uint8_t* in = resized.ptr<std::uint8_t>(y);
    const std::size_t row = static_cast<std::size_t>(y) * static_cast<std::size_t>(s);
    for (int x = 0; x < s; ++x) {
      const std::ptrdiff_t from = flip ? s - 1 - x : x;
      const std::uint8_t* p = in + 3 * from;
      for (int c = 0; c < 3; ++c) {
        const std::size_t at = c * plane + row + static_cast<std::size_t>(x);
        if (dtype == HostDType::kFloat32) {
          static_cast<float*>(dst)[at] = lut[c][p[c]];
        } else {
          static_cast<std::uint8_t*>(dst)[at] = p[c];
        }
      }
    }
  }
}

// The resized image's rows, H x W x C, normalised through lut into float.
void write_hwc_float(const cv::Mat& resized, int s, bool flip, const Lut& lut, float* out) {
  const std::size_t row_elems = static_cast<std::size_t>(s) * 3;
  for (int y = 0; y < s; ++y) {
    const std::uint8_t* in = resized.ptr<std::uint8_t>(y);
    float* o = out + y * row_elems;
    if (!flip) {
      for (int x = 0; x < s; ++x) {
        o[3 * x + 0] = lut[0][in[3 * x + 0]];
        o[3 * x + 1] = lut[1][in[3 * x + 1]];
        o[3 * x + 2] = lut[2][in[3 * x + 2]];
      }
    } else {
      for (int x = 0; x < s; ++x) {
        const std::ptrdiff_t from = s - 1 - x;
        const std::uint8_t* p = in + 3 * from;
        o[3 * x + 0] = lut[0][p[0]];
        o[3 * x + 1] = lut[1][p[1]];
        o[3 * x + 2] = lut[2][p[2]];
      }
    }
  }
}

// The resized image's rows, H x W x C, as uint8.
void write_hwc_uint8(const cv::Mat& resized, int s, bool flip, std::uint8_t* out) {
  const std::size_t row_elems = static_cast<std::size_t>(s) * 3;
  for (int y = 0; y < s; ++y) {
    const std::uint8_t* in = resized.ptr<std::uint8_t>(y);
    std::uint8_t* o = out + y * row_elems;
    if (!flip) {
      std::memcpy(o, in, row_elems);
    } else {
      for (int x = 0; x < s; ++x) {
        const std::ptrdiff_t from = s - 1 - x;
        const std::uint8_t* p = in + 3 * from;
        o[3 * x + 0] = p[0];
        o[3 * x + 1] = p[1];
        o[3 * x + 2] = p[2];
      }
    }
  }
}

}  // namespace

std::uint64_t SampleTransform::write(const RgbView& crop, bool flip, void* dst,
                                     TransformTimes* times) {
  Clock::time_point t;
  if (times) t = Clock::now();
  const int s = options_.image_size;
  const cv::Mat src(crop.height, crop.width, CV_8UC3, const_cast<std::uint8_t*>(crop.data),
                    crop.stride);
  if (crop.width == s && crop.height == s) {
    src.copyTo(resized_);
  } else {
    cv::resize(src, resized_, cv::Size(s, s), 0, 0,
               resize_interpolation(crop.width, crop.height, s));
  }
  if (times) times->resize_ns = lap(t);
  if (options_.layout == ImageLayout::kNchw) {
    write_planes(resized_, s, flip, options_.dtype, lut_, dst);
  } else if (options_.dtype == HostDType::kFloat32) {
    write_hwc_float(resized_, s, flip, lut_, static_cast<float*>(dst));
  } else {
    write_hwc_uint8(resized_, s, flip, static_cast<std::uint8_t*>(dst));
  }
  if (times) times->write_ns = lap(t);
  const std::uint64_t digest = common::hash64(dst, sample_bytes());
  if (times) times->digest_ns = lap(t);
  return digest;
}

}  // namespace data_pipeline
