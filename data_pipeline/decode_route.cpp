// The hardware JPEG decoder's routing table.
#include "data_pipeline/decode_route.h"

namespace data_pipeline {

RouteDecision hardware_route(const JpegHeader& h) {
  auto cpu = [](const char* why) { return RouteDecision{DecodeRoute::kCpu, why}; };
  if (h.precision != 8) return cpu("more than 8 bits per sample");
  if (h.progressive) return cpu("progressive");
  if (h.arithmetic) return cpu("arithmetic coding");
  switch (h.color_space) {
    case JpegColorSpace::kGray:
      return h.components == 1 ? RouteDecision{DecodeRoute::kHardware, ""}
                               : cpu("unusual grayscale stream");
    case JpegColorSpace::kYCbCr:
      break;
    case JpegColorSpace::kCmyk:
      return cpu("CMYK");
    case JpegColorSpace::kYcck:
      return cpu("YCCK");
    case JpegColorSpace::kRgb:
      return cpu("RGB stored without colour transform");
    case JpegColorSpace::kOther:
      return cpu("unknown colour space");
  }
  if (h.components != 3) return cpu("unusual component count");
  switch (h.subsampling) {
    case ChromaSubsampling::k444:
    case ChromaSubsampling::k422:
    case ChromaSubsampling::k420:
    case ChromaSubsampling::k440:
      return {DecodeRoute::kHardware, ""};
    case ChromaSubsampling::k411:
      return cpu("4:1:1 subsampling");
    case ChromaSubsampling::k410:
      return cpu("4:1:0 subsampling");
    case ChromaSubsampling::kGray:
    case ChromaSubsampling::kOther:
      break;
  }
  return cpu("unusual subsampling");
}

bool ends_with_eoi(const std::uint8_t* data, std::size_t size) {
  while (size > 0 && data[size - 1] == 0x00) --size;
  return size >= 4 && data[size - 2] == 0xFF && data[size - 1] == 0xD9;
}

}  // namespace data_pipeline
