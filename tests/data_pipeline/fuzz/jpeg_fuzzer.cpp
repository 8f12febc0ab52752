// libFuzzer target: arbitrary bytes through the JPEG decode + augment path (SampleTransform) and a
// plain full decode. Anything but a DataError (or success) is a bug: crashes, sanitizer reports,
// other exceptions, hangs.
//
// The two full decodes write every pixel the header declares. A stream of 300 bytes can declare a
// 10,041 x 11,096 progressive image, which the decoder takes (under kMaxImagePixels) and fills: 15
// s of memset and libjpeg's output under ASan, past -timeout, for a path that 16 megapixels covers
// too. So the full decodes skip a JPEG whose header declares more than kMaxFullDecodePixels, as
// libjpeg-turbo's own fuzzers cap theirs; the fused decode, which reads a scaled crop, and the
// header's checks take every input.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/hash64.h"
#include "data_pipeline/counter_rng.h"
#include "data_pipeline/data_error.h"
#include "data_pipeline/jpeg_decoder.h"
#include "data_pipeline/sample_transform.h"

namespace {

constexpr std::uint64_t kMaxFullDecodePixels = std::uint64_t{1} << 24;

// False for a JPEG whose header declares more than kMaxFullDecodePixels; true otherwise, an
// unreadable header included (the full decodes then end in its DataError).
bool full_decode_is_bounded(data_pipeline::JpegDecoder& decoder, const std::uint8_t* data,
                            std::size_t size) {
  if (!data_pipeline::JpegDecoder::looks_like_jpeg(data, size)) return true;
  try {
    const data_pipeline::JpegHeader h = decoder.read_header(data, size, "fuzz.jpg");
    return static_cast<std::uint64_t>(h.width) * static_cast<std::uint64_t>(h.height) <=
           kMaxFullDecodePixels;
  } catch (const data_pipeline::DataError&) {
    return true;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace data_pipeline;
  static SampleTransform fused([] {
    TransformOptions o;
    o.image_size = 40;
    return o;
  }());
  static SampleTransform full([] {
    TransformOptions o;
    o.image_size = 24;
    o.dtype = HostDType::kUInt8;
    o.decode_mode = DecodeMode::kFull;
    return o;
  }());
  static JpegDecoder decoder;
  static std::vector<float> out_f(40 * 40 * 3);
  static std::vector<std::uint8_t> out_u(24 * 24 * 3);
  // The crop depends on the input, so different inputs reach different ROI/scale paths.
  const std::uint64_t key = common::hash64(data, size < 64 ? size : 64);
  try {
    CounterRng rng(key, 0, 0, CounterRng::kAugment);
    fused.apply(data, size, "fuzz.jpg", rng, out_f.data());
  } catch (const DataError&) {
  }
  if (!full_decode_is_bounded(decoder, data, size)) return 0;
  try {
    CounterRng rng(key, 1, 0, CounterRng::kAugment);
    full.apply(data, size, "fuzz.jpg", rng, out_u.data());
  } catch (const DataError&) {
  }
  try {
    if (JpegDecoder::looks_like_jpeg(data, size)) decoder.decode_full(data, size, "fuzz.jpg");
  } catch (const DataError&) {
  }
  return 0;
}
