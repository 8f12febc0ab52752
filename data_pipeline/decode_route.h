// Which images the GPU's hardware JPEG decoder takes (--decode gpu), decided from the header alone;
// the others go to the CPU path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/named_enum.h"
#include "data_pipeline/jpeg_decoder.h"

namespace data_pipeline {

/// Where one image of a --decode gpu batch is decoded.
enum class DecodeRoute {
  kHardware,  ///< nvJPEG's hardware backend (the GPU's JPEG engines).
  kCpu,       ///< The CPU path (SampleTransform), its pixels copied into the batch.
};
inline constexpr common::EnumName<DecodeRoute> kDecodeRouteNames[] = {
    {DecodeRoute::kHardware, "hardware"}, {DecodeRoute::kCpu, "cpu"}};
constexpr const auto& enum_names(DecodeRoute) { return kDecodeRouteNames; }

/// A route and, for the CPU, why ("progressive", "4:1:1 subsampling", ...; empty for the engine).
struct RouteDecision {
  DecodeRoute route = DecodeRoute::kCpu;
  const char* reason = "";
};

/// The hardware decoder's routing table, from what the H200's engines were measured to take:
/// baseline (sequential, Huffman-coded) 8-bit JPEGs of one component or three YCbCr components
/// subsampled 4:4:4, 4:2:2, 4:2:0 or 4:4:0. Not: progressive or arithmetic coding, 4:1:1 / 4:1:0
/// or other factors, CMYK / YCCK / RGB-stored streams, more than 8 bits. Restart markers pass here;
/// nvjpegDecodeBatchedSupportedEx has the last word on the GPU. Pure; thread-safe.
RouteDecision hardware_route(const JpegHeader& header);

/// True when the stream's last bytes, after any trailing zero padding, are the end-of-image
/// marker (FF D9). The CPU path refuses a stream cut short; the hardware decoder would decode one
/// into grey, so a stream that does not end this way (cut short, or with data appended after its
/// image) goes to the CPU path, which decides. Pure; thread-safe.
bool ends_with_eoi(const std::uint8_t* data, std::size_t size);

}  // namespace data_pipeline
