// Writes the fuzzer's seed corpus: small JPEGs of every kind the decoder supports (baseline and
// progressive, every subsampling, restart markers, arithmetic coding, grayscale, CMYK, YCCK).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <opencv2/imgproc.hpp>
#include <string>

#include "data_pipeline/synthetic/jpeg_encoder.h"
#include "data_pipeline/synthetic/synthetic_food.h"

int main(int argc, char** argv) {
  using namespace data_pipeline;
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_jpeg_corpus DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  int written = 0;
  auto save = [&](const std::string& name, const std::vector<std::uint8_t>& bytes) {
    std::ofstream out(dir + "/" + name + ".jpg", std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    written += out.good() ? 1 : 0;
  };
  const ChromaSubsampling subs[] = {ChromaSubsampling::k444, ChromaSubsampling::k422,
                                    ChromaSubsampling::k420, ChromaSubsampling::k440,
                                    ChromaSubsampling::k411};
  const char* sub_names[] = {"444", "422", "420", "440", "411"};
  cv::Mat rgb;
  cv::resize(make_synthetic_food_image(3, 1, 2), rgb, cv::Size(72, 56));
  cv::Mat gray;
  cv::cvtColor(rgb, gray, cv::COLOR_RGB2GRAY);
  cv::Mat cmyk;
  cv::cvtColor(rgb, cmyk, cv::COLOR_RGB2RGBA);
  for (int s = 0; s < 5; ++s) {
    for (int mode = 0; mode < 4; ++mode) {  // baseline, progressive, restart, arithmetic
      JpegEncodeOptions o;
      o.quality = 80;
      o.subsampling = subs[s];
      o.progressive = mode == 1;
      o.restart_interval = mode == 2 ? 1 : 0;
      o.arithmetic = mode == 3;
      const char* mode_names[] = {"baseline", "progressive", "restart", "arithmetic"};
      save(std::string(mode_names[mode]) + "_" + sub_names[s],
           encode_jpeg(rgb.data, rgb.cols, rgb.rows, 3, rgb.step[0], o));
    }
  }
  JpegEncodeOptions g;
  g.color = JpegColor::kGrayscale;
  save("grayscale", encode_jpeg(gray.data, gray.cols, gray.rows, 1, gray.step[0], g));
  g.progressive = true;
  save("grayscale_progressive", encode_jpeg(gray.data, gray.cols, gray.rows, 1, gray.step[0], g));
  JpegEncodeOptions c;
  c.color = JpegColor::kCmykAdobe;
  save("cmyk", encode_jpeg(cmyk.data, cmyk.cols, cmyk.rows, 4, cmyk.step[0], c));
  c.color = JpegColor::kYcckAdobe;
  save("ycck", encode_jpeg(cmyk.data, cmyk.cols, cmyk.rows, 4, cmyk.step[0], c));
  cv::Mat tiny;
  cv::resize(rgb, tiny, cv::Size(9, 7));
  save("tiny", encode_jpeg(tiny.data, tiny.cols, tiny.rows, 3, tiny.step[0]));
  std::printf("make_jpeg_corpus: %d files in %s\n", written, dir.c_str());
  return written > 0 ? 0 : 1;
}
