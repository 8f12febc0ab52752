// libjpeg-turbo encoder for the synthetic dataset and for test images of every JPEG kind.
#include "data_pipeline/synthetic/jpeg_encoder.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <jpeglib.h>

namespace data_pipeline {

namespace {

struct EncodeErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void encode_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<EncodeErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Owns the compressor and the output buffer that jpeg_mem_dest allocates with malloc.
struct Compressor {
  jpeg_compress_struct cinfo{};
  EncodeErrorManager err{};
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  Compressor() {
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = encode_error_exit;
    jpeg_create_compress(&cinfo);
  }
  ~Compressor() {
    jpeg_destroy_compress(&cinfo);
    std::free(out);
  }
};

void set_sampling(jpeg_compress_struct& cinfo, ChromaSubsampling s) {
  int h = 2, v = 2;
  switch (s) {
    case ChromaSubsampling::k444:
      h = 1;
      v = 1;
      break;
    case ChromaSubsampling::k422:
      h = 2;
      v = 1;
      break;
    case ChromaSubsampling::k420:
      h = 2;
      v = 2;
      break;
    case ChromaSubsampling::k440:
      h = 1;
      v = 2;
      break;
    case ChromaSubsampling::k411:
      h = 4;
      v = 1;
      break;
    case ChromaSubsampling::k410:
      h = 4;
      v = 2;
      break;
    case ChromaSubsampling::kGray:
    case ChromaSubsampling::kOther:
      throw std::invalid_argument("encode_jpeg: expected a subsampling from 4:4:4 to 4:1:0");
  }
  cinfo.comp_info[0].h_samp_factor = h;
  cinfo.comp_info[0].v_samp_factor = v;
  for (int c = 1; c < cinfo.num_components; ++c) {
    cinfo.comp_info[c].h_samp_factor = 1;
    cinfo.comp_info[c].v_samp_factor = 1;
  }
  if (cinfo.num_components == 4) {  // K (or the YCCK K) at full resolution like Y
    cinfo.comp_info[3].h_samp_factor = h;
    cinfo.comp_info[3].v_samp_factor = v;
  }
}

}  // namespace

std::vector<std::uint8_t> encode_jpeg(const std::uint8_t* pixels, int width, int height,
                                      int channels, std::size_t stride,
                                      const JpegEncodeOptions& options) {
  const int expected =
      options.color == JpegColor::kGrayscale ? 1 : (options.color == JpegColor::kYCbCr ? 3 : 4);
  if (channels != expected) {
    throw std::invalid_argument("encode_jpeg: expected " + std::to_string(expected) +
                                " channels for this colour model, got " + std::to_string(channels));
  }
  Compressor c;
  jpeg_compress_struct& cinfo = c.cinfo;
  if (setjmp(c.err.jump)) {
    throw std::runtime_error(std::string("JPEG encode failed: ") + c.err.message);
  }
  jpeg_mem_dest(&cinfo, &c.out, &c.out_size);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = channels;
  switch (options.color) {
    case JpegColor::kGrayscale:
      cinfo.in_color_space = JCS_GRAYSCALE;
      break;
    case JpegColor::kYCbCr:
      cinfo.in_color_space = JCS_RGB;
      break;
    case JpegColor::kCmykAdobe:
    case JpegColor::kYcckAdobe:
      cinfo.in_color_space = JCS_CMYK;
      break;
  }
  jpeg_set_defaults(&cinfo);
  if (options.color == JpegColor::kCmykAdobe) jpeg_set_colorspace(&cinfo, JCS_CMYK);
  if (options.color == JpegColor::kYcckAdobe) jpeg_set_colorspace(&cinfo, JCS_YCCK);
  jpeg_set_quality(&cinfo, options.quality, TRUE);
  if (options.color != JpegColor::kGrayscale) set_sampling(cinfo, options.subsampling);
  if (options.progressive) jpeg_simple_progression(&cinfo);
  cinfo.arith_code = options.arithmetic ? TRUE : FALSE;
  cinfo.optimize_coding = options.optimize_coding ? TRUE : FALSE;
  cinfo.restart_interval = static_cast<unsigned>(options.restart_interval);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(pixels + cinfo.next_scanline * stride);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  return std::vector<std::uint8_t>(c.out, c.out + c.out_size);
}

}  // namespace data_pipeline
