// libFuzzer target: arbitrary bytes through the JPEG decode + augment path (SampleTransform) and a
// plain full decode. Anything but a DataError (or success) is a bug: crashes, sanitizer reports,
// other exceptions, hangs.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/hash64.h"
#include "data_pipeline/counter_rng.h"
#include "data_pipeline/data_error.h"
#include "data_pipeline/jpeg_decoder.h"
#include "data_pipeline/sample_transform.h"

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
