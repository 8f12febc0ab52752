// libjpeg-turbo ROI + DCT-scaled decoding, with libjpeg errors turned into DataError.
#include "data_pipeline/jpeg_decoder.h"

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>

// jpeglib.h needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>

#include "data_pipeline/data_error.h"

#if !defined(JCS_EXTENSIONS)
#error "data_pipeline needs libjpeg-turbo (jpeg_crop_scanline, jpeg_skip_scanlines)"
#endif

namespace data_pipeline {

namespace {

// Hard caps so that a corrupt or hostile header cannot make a worker allocate gigabytes: images up
// to kMaxImagePixels (one pixel buffer: at most 4 bytes a pixel, 512 MiB; CMYK is converted in
// place), libjpeg's own buffers (a progressive image's coefficients) up to 768 MiB, and a pixel
// buffer above 64 MiB is released after use. tests/data_pipeline/fuzz/run_fuzzer.sh's memory limits
// follow from these.
constexpr long kMaxLibjpegMemory = 768L << 20;
constexpr std::size_t kKeepBufferBytes = std::size_t{64} << 20;

// Output pixels decoded beyond each side of the crop (see the comment in decode()).
constexpr int kRoiMargin = 8;

// DCT scales (numerators over 8) that the fused path chooses from, smallest first.
constexpr int kFastScales[] = {1, 2, 4, 8};

struct ErrorManager {
  jpeg_error_mgr pub;  // must stay first: libjpeg sees only this part
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void on_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings (level -1) are corrupt-data notices. A premature end of data is fatal for us: libjpeg
// would pad the image with grey and the batch would silently contain garbage.
void on_emit_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  if (cinfo->err->msg_code == JWRN_JPEG_EOF) {
    auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
    std::snprintf(err->message, sizeof(err->message),
                  "premature end of JPEG data (truncated file)");
    std::longjmp(err->jump, 1);
  }
  cinfo->err->num_warnings++;
}

// True when an end-of-image marker (FF D9) follows the start of the entropy-coded data. Entropy
// data never contains FF D9 (FF is stuffed as FF 00), so a missing EOI means the file was cut
// short; an EXIF thumbnail's EOI lies before the scan data and does not count.
bool has_eoi_after(const std::uint8_t* data, std::size_t size, std::size_t scan_start) {
  if (size < 2) return false;
  for (std::size_t i = size - 1; i > scan_start; --i) {
    if (data[i] == 0xD9 && data[i - 1] == 0xFF) return true;
  }
  return false;
}

inline std::uint8_t mul255(unsigned a, unsigned b) {
  // Exact round(a * b / 255) for a, b in [0, 255].
  unsigned t = a * b + 128;
  return static_cast<std::uint8_t>((t + (t >> 8)) >> 8);
}

}  // namespace

struct JpegDecoder::State {
  jpeg_decompress_struct cinfo{};
  ErrorManager err{};
  std::vector<std::uint8_t> pixels;  // decoded rows (RGB, or CMYK and then its RGB, in place)

  State() {
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = on_error_exit;
    err.pub.emit_message = on_emit_message;
    err.message[0] = '\0';
    jpeg_create_decompress(&cinfo);
    cinfo.mem->max_memory_to_use = kMaxLibjpegMemory;
  }
  ~State() { jpeg_destroy_decompress(&cinfo); }
};

JpegDecoder::JpegDecoder() : state_(std::make_unique<State>()) {}
JpegDecoder::~JpegDecoder() = default;

bool JpegDecoder::looks_like_jpeg(const std::uint8_t* data, std::size_t size) {
  return size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

namespace {

ChromaSubsampling subsampling_of(const jpeg_decompress_struct& cinfo) {
  if (cinfo.num_components == 1) return ChromaSubsampling::kGray;
  // The first component against the others, which must agree among themselves (the fourth of a
  // CMYK/YCCK stream may be sampled like the first).
  const jpeg_component_info* c = cinfo.comp_info;
  for (int i = 2; i < std::min(cinfo.num_components, 3); ++i) {
    if (c[i].h_samp_factor != c[1].h_samp_factor || c[i].v_samp_factor != c[1].v_samp_factor) {
      return ChromaSubsampling::kOther;
    }
  }
  if (c[1].h_samp_factor != 1 || c[1].v_samp_factor != 1) return ChromaSubsampling::kOther;
  const int h = c[0].h_samp_factor, v = c[0].v_samp_factor;
  if (h == 1 && v == 1) return ChromaSubsampling::k444;
  if (h == 2 && v == 1) return ChromaSubsampling::k422;
  if (h == 2 && v == 2) return ChromaSubsampling::k420;
  if (h == 1 && v == 2) return ChromaSubsampling::k440;
  if (h == 4 && v == 1) return ChromaSubsampling::k411;
  if (h == 4 && v == 2) return ChromaSubsampling::k410;
  return ChromaSubsampling::kOther;
}

JpegColorSpace color_space_of(J_COLOR_SPACE space) {
  switch (space) {
    case JCS_GRAYSCALE:
      return JpegColorSpace::kGray;
    case JCS_YCbCr:
      return JpegColorSpace::kYCbCr;
    case JCS_RGB:
      return JpegColorSpace::kRgb;
    case JCS_CMYK:
      return JpegColorSpace::kCmyk;
    case JCS_YCCK:
      return JpegColorSpace::kYcck;
    default:
      return JpegColorSpace::kOther;
  }
}

}  // namespace

namespace {

// The checks decode() and read_header() share, once libjpeg has read the header: the stream ends
// with an end-of-image marker after its scan data (not truncated), and the image is not larger
// than kMaxImagePixels. Writes the problem into `message` and returns false; the caller longjmps
// (this function must not: it returns before the caller's setjmp frame would be left).
bool header_is_usable(const jpeg_decompress_struct& cinfo, const std::uint8_t* data,
                      std::size_t size, char* message, std::size_t message_size) {
  if (!has_eoi_after(data, size, size - cinfo.src->bytes_in_buffer)) {
    std::snprintf(message, message_size,
                  "no end-of-image marker after the scan data (truncated file)");
    return false;
  }
  const auto width = static_cast<std::uint64_t>(cinfo.image_width);
  const auto height = static_cast<std::uint64_t>(cinfo.image_height);
  if (width * height > kMaxImagePixels) {
    std::snprintf(message, message_size, "image of %llux%llu pixels is too large",
                  static_cast<unsigned long long>(width), static_cast<unsigned long long>(height));
    return false;
  }
  return true;
}

// Inputs no libjpeg call should see. \throws DataError naming `name`.
void check_jpeg_input(const std::uint8_t* data, std::size_t size, const std::string& name) {
  if (size == 0) throw DataError(name + ": empty file (0 bytes)");
  if (!JpegDecoder::looks_like_jpeg(data, size)) throw DataError(name + ": not a JPEG stream");
}

}  // namespace

JpegHeader JpegDecoder::read_header(const std::uint8_t* data, std::size_t size,
                                    const std::string& name) {
  State& s = *state_;
  jpeg_decompress_struct& cinfo = s.cinfo;
  check_jpeg_input(data, size, name);
  if (setjmp(s.err.jump)) {
    jpeg_abort_decompress(&cinfo);
    throw DataError(name + ": JPEG header: " + s.err.message);
  }
  s.err.message[0] = '\0';
  s.err.pub.num_warnings = 0;
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  if (!header_is_usable(cinfo, data, size, s.err.message, sizeof(s.err.message))) {
    std::longjmp(s.err.jump, 1);
  }
  JpegHeader h;
  h.width = static_cast<int>(cinfo.image_width);
  h.height = static_cast<int>(cinfo.image_height);
  h.components = cinfo.num_components;
  h.subsampling = subsampling_of(cinfo);
  h.color_space = color_space_of(cinfo.jpeg_color_space);
  h.progressive = cinfo.progressive_mode != 0;
  h.arithmetic = cinfo.arith_code != 0;
  h.precision = cinfo.data_precision;
  h.restart_interval = static_cast<int>(cinfo.restart_interval);
  jpeg_abort_decompress(&cinfo);
  return h;
}

RgbView JpegDecoder::decode_full(const std::uint8_t* data, std::size_t size,
                                 const std::string& name, DecodeInfo* info) {
  auto whole = [](void*, int w, int h) { return CropRect{0, 0, w, h}; };
  return decode(data, size, name, whole, nullptr, 1, 1, DecodeMode::kFull, info);
}

namespace {

// The chooser's crop, clamped into the image and at least one pixel.
CropRect clamped(CropRect crop, int width, int height) {
  crop.x = std::clamp(crop.x, 0, width - 1);
  crop.y = std::clamp(crop.y, 0, height - 1);
  crop.width = std::clamp(crop.width, 1, width - crop.x);
  crop.height = std::clamp(crop.height, 1, height - crop.y);
  return crop;
}

// The smallest scale (of 8) that libjpeg-turbo has a SIMD inverse DCT for and that keeps the crop
// at least min_width x min_height; 8 when none does.
int fast_scale(const jpeg_decompress_struct& cinfo, const CropRect& crop, int min_width,
               int min_height) {
  // Only the scales libjpeg-turbo has SIMD inverse DCTs for (1/8 is the DC term, 2/8 and 4/8
  // the reduced 2x2 and 4x4 kernels, 8/8 the full one). 3/8, 5/8, 6/8 and 7/8 run plain-C
  // kernels and cost more than a full-size SIMD decode (x86-64, 512-pixel images: 0.8 ms at
  // 7/8 against 0.5 ms at 8/8), so the smallest *fast* scale is the cheaper choice.
  // With 4x chroma subsampling (4:1:1, 4:1:0) a 1/8 scale leaves one chroma sample per 32
  // pixels, which libjpeg replicates: start at 2/8 there.
  const int min_scale = (cinfo.max_h_samp_factor > 2 || cinfo.max_v_samp_factor > 2) ? 2 : 1;
  for (int m : kFastScales) {
    if (m < min_scale) continue;
    if (crop.width * m >= min_width * 8 && crop.height * m >= min_height * 8) return m;
  }
  return 8;
}

// CMYK rows (width x height at src, row_bytes >= 4 * width apart) to packed RGB at rgb, which may
// be the start of the same buffer, at or before src: each pixel's 4 bytes are read before its 3
// are written, and no write reaches a byte not yet read (pixel i's RGB ends at 3i + 3, its CMYK
// starts at 4i or later), so the conversion needs no second buffer. Adobe-marked files store
// inverted inks (Photoshop), so R = C * K / 255 there; otherwise R = (255 - C) * (255 - K) / 255.
void cmyk_to_rgb(const std::uint8_t* src_rows, std::size_t row_bytes, int width, int height,
                 bool adobe_inverted, std::uint8_t* rgb) {
  const std::size_t rgb_stride = static_cast<std::size_t>(width) * 3;
  for (int y = 0; y < height; ++y) {
    const std::uint8_t* src = src_rows + static_cast<std::size_t>(y) * row_bytes;
    std::uint8_t* dst = rgb + static_cast<std::size_t>(y) * rgb_stride;
    for (int x = 0; x < width; ++x, src += 4, dst += 3) {
      unsigned c = src[0], m = src[1], yy = src[2], k = src[3];
      if (!adobe_inverted) {
        c = 255 - c;
        m = 255 - m;
        yy = 255 - yy;
        k = 255 - k;
      }
      dst[0] = mul255(c, k);
      dst[1] = mul255(m, k);
      dst[2] = mul255(yy, k);
    }
  }
}

// The crop in the scaled image's coordinates, rounded to whole pixels: [x0, x1) x [y0, y1).
struct ScaledRegion {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

ScaledRegion scaled_region(const CropRect& crop, int scale, const jpeg_decompress_struct& cinfo) {
  const int out_w = static_cast<int>(cinfo.output_width);
  const int out_h = static_cast<int>(cinfo.output_height);
  auto scaled = [scale](int v) { return static_cast<int>(std::floor(v * scale / 8.0 + 0.5)); };
  ScaledRegion r;
  r.x0 = std::min(scaled(crop.x), out_w - 1);
  r.y0 = std::min(scaled(crop.y), out_h - 1);
  r.x1 = std::clamp(scaled(crop.x + crop.width), r.x0 + 1, out_w);
  r.y1 = std::clamp(scaled(crop.y + crop.height), r.y0 + 1, out_h);
  return r;
}

// Where the decoded rows sit in the scaled image (from column xoffset, row first_row), and the
// bytes of one row in the buffer.
struct DecodedRows {
  JDIMENSION xoffset = 0;
  int first_row = 0;
  std::size_t row_bytes = 0;
};

// Decodes the scaled image's rows into pixels: all of them, or for a fused ROI decode the
// region's with a margin (the columns widened to iMCU boundaries). libjpeg's errors longjmp out
// of it to decode()'s setjmp: it holds only trivially destructible locals.
DecodedRows read_rows(jpeg_decompress_struct& cinfo, DecodeMode mode, const ScaledRegion& r,
                      std::vector<std::uint8_t>& pixels) {
  const int out_w = static_cast<int>(cinfo.output_width);
  const int out_h = static_cast<int>(cinfo.output_height);
  // Decode a margin around the crop: fancy (triangle) chroma upsampling at the edge of a decoded
  // region replicates the edge sample instead of reading its neighbour, so without the margin
  // the crop's border pixels would differ from a full decode's.
  DecodedRows rows;
  JDIMENSION decoded_width = cinfo.output_width;
  if (mode == DecodeMode::kFusedRoi) {
    const int dx0 = std::max(0, r.x0 - kRoiMargin);
    const int dx1 = std::min(out_w, r.x1 + kRoiMargin);
    if (dx0 > 0 || dx1 < out_w) {
      rows.xoffset = static_cast<JDIMENSION>(dx0);
      decoded_width = static_cast<JDIMENSION>(dx1 - dx0);
      jpeg_crop_scanline(&cinfo, &rows.xoffset, &decoded_width);  // widens to iMCU boundaries
    }
    rows.first_row = std::max(0, r.y0 - kRoiMargin);
    if (rows.first_row > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(rows.first_row));
  }
  const int last_row = (mode == DecodeMode::kFusedRoi) ? std::min(out_h, r.y1 + kRoiMargin) : out_h;
  rows.row_bytes = static_cast<std::size_t>(cinfo.output_width) *
                   static_cast<std::size_t>(cinfo.output_components);
  const std::size_t count = static_cast<std::size_t>(last_row - rows.first_row);
  if (pixels.size() < rows.row_bytes * count) pixels.resize(rows.row_bytes * count);
  while (static_cast<int>(cinfo.output_scanline) < last_row) {
    JSAMPROW row_ptrs[8];
    const int row = static_cast<int>(cinfo.output_scanline);
    const int n = std::min(8, last_row - row);
    for (int k = 0; k < n; ++k) {
      row_ptrs[k] =
          pixels.data() + static_cast<std::size_t>(row - rows.first_row + k) * rows.row_bytes;
    }
    jpeg_read_scanlines(&cinfo, row_ptrs, static_cast<JDIMENSION>(n));
  }
  return rows;
}

}  // namespace

RgbView JpegDecoder::decode(const std::uint8_t* data, std::size_t size, const std::string& name,
                            CropChooser choose, void* context, int min_width, int min_height,
                            DecodeMode mode, DecodeInfo* info) {
  State& s = *state_;
  jpeg_decompress_struct& cinfo = s.cinfo;
  // The previous view is no longer needed: drop buffers an unusually large image left behind.
  if (s.pixels.capacity() > kKeepBufferBytes) std::vector<std::uint8_t>().swap(s.pixels);
  check_jpeg_input(data, size, name);

  // Everything between setjmp and the end of decoding touches only `s` and trivially destructible
  // locals, so a longjmp from libjpeg skips no destructor.
  if (setjmp(s.err.jump)) {
    jpeg_abort_decompress(&cinfo);
    throw DataError(name + ": JPEG decode failed: " + s.err.message);
  }
  s.err.message[0] = '\0';
  s.err.pub.num_warnings = 0;
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);

  if (!header_is_usable(cinfo, data, size, s.err.message, sizeof(s.err.message))) {
    std::longjmp(s.err.jump, 1);
  }
  const int width = static_cast<int>(cinfo.image_width);
  const int height = static_cast<int>(cinfo.image_height);
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;  // libjpeg-turbo expands grayscale to RGB
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;

  const CropRect crop = clamped(choose(context, width, height), width, height);
  const int scale =
      mode == DecodeMode::kFusedRoi ? fast_scale(cinfo, crop, min_width, min_height) : 8;
  cinfo.scale_num = static_cast<unsigned>(scale);
  cinfo.scale_denom = 8;
  jpeg_start_decompress(&cinfo);

  const ScaledRegion r = scaled_region(crop, scale, cinfo);
  const int rx0 = r.x0, ry0 = r.y0, rx1 = r.x1, ry1 = r.y1;
  const DecodedRows rows = read_rows(cinfo, mode, r, s.pixels);
  const JDIMENSION xoffset = rows.xoffset;
  const int first_row = rows.first_row;
  const int channels = cinfo.output_components;  // 3 (RGB) or 4 (CMYK)
  const std::size_t row_bytes = rows.row_bytes;
  const bool adobe_inverted = cinfo.saw_Adobe_marker;
  const int color_space = cinfo.jpeg_color_space;
  const bool progressive = cinfo.progressive_mode;
  // Stop here: the rows below the crop are never decoded.
  jpeg_abort_decompress(&cinfo);

  const int view_x = rx0 - static_cast<int>(xoffset);
  const int view_y = ry0 - first_row;
  RgbView view;
  view.width = rx1 - rx0;
  view.height = ry1 - ry0;
  const std::uint8_t* first = s.pixels.data() + static_cast<std::size_t>(view_y) * row_bytes +
                              static_cast<std::size_t>(view_x) * static_cast<std::size_t>(channels);
  if (channels == 4) {
    cmyk_to_rgb(first, row_bytes, view.width, view.height, adobe_inverted, s.pixels.data());
    view.data = s.pixels.data();
    view.stride = static_cast<std::size_t>(view.width) * 3;
  } else {
    view.data = first;
    view.stride = row_bytes;
  }
  if (info) {
    info->image_width = width;
    info->image_height = height;
    info->scale_num = scale;
    info->crop = crop;
    info->progressive = progressive;
    info->region_x0 = rx0 * 8.0 / scale;
    info->region_y0 = ry0 * 8.0 / scale;
    info->region_x1 = std::min<double>(rx1 * 8.0 / scale, width);
    info->region_y1 = std::min<double>(ry1 * 8.0 / scale, height);
    info->color_space = color_space;
  }
  return view;
}

}  // namespace data_pipeline
