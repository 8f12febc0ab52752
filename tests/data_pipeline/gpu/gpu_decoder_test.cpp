// Tests of the GPU decode stage (--decode gpu) on a GPU with hardware JPEG engines: the resize
// kernel against its CPU reference, the engine's region-of-interest decode against its full
// decode, its pixels against libjpeg-turbo's, the stage's batches against the CPU loader's (crop
// windows, flips, labels, pixels within the stated tolerance), digests across loader settings, the
// fallback to the CPU path, buffer reuse fenced on the host, the bad-image policy and reset().
// Built only in CUDA builds with nvJPEG; each test skips without a GPU.
#include "data_pipeline/gpu/gpu_decoder.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nvjpeg.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <opencv2/imgproc.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/hash64.h"
#include "data_pipeline/data_error.h"
#include "data_pipeline/decode_route.h"
#include "data_pipeline/food101_index.h"
#include "data_pipeline/gpu/resize_normalize.h"
#include "data_pipeline/jpeg_decoder.h"
#include "data_pipeline/loader.h"
#include "data_pipeline/resize_filter.h"
#include "data_pipeline/sample_transform.h"
#include "data_pipeline/synthetic/jpeg_encoder.h"
#include "data_pipeline/synthetic/synthetic_food.h"
#include "tests/support/test_util.h"

namespace data_pipeline::gpu {
namespace {

namespace fs = std::filesystem;
using S = ChromaSubsampling;

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device"

void check(cudaError_t e, const char* what) {
  ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e);
}
void check_nv(nvjpegStatus_t s, const char* what) {
  ASSERT_EQ(s, NVJPEG_STATUS_SUCCESS) << what << " returned " << static_cast<int>(s);
}

// A food-like picture (smooth fields, edges, noise) at `width` x `height`, 8-bit RGB.
cv::Mat picture(int width, int height, int item = 0) {
  cv::Mat rgb = make_synthetic_food_image(11, 3, item);
  cv::Mat out;
  cv::resize(rgb, out, cv::Size(width, height), 0, 0, cv::INTER_AREA);
  return out;
}

std::vector<std::uint8_t> encode(const cv::Mat& rgb, const JpegEncodeOptions& o) {
  if (o.color == JpegColor::kGrayscale) {
    cv::Mat gray;
    cv::cvtColor(rgb, gray, cv::COLOR_RGB2GRAY);
    return encode_jpeg(gray.data, gray.cols, gray.rows, 1, gray.step[0], o);
  }
  if (o.color != JpegColor::kYCbCr) {
    cv::Mat cmyk(rgb.rows, rgb.cols, CV_8UC4);
    for (int y = 0; y < rgb.rows; ++y) {
      for (int x = 0; x < rgb.cols; ++x) {
        const auto p = rgb.at<cv::Vec3b>(y, x);
        cmyk.at<cv::Vec4b>(y, x) = cv::Vec4b(p[0], p[1], p[2], 255);  // inverted inks, no black
      }
    }
    return encode_jpeg(cmyk.data, cmyk.cols, cmyk.rows, 4, cmyk.step[0], o);
  }
  return encode_jpeg(rgb.data, rgb.cols, rgb.rows, 3, rgb.step[0], o);
}

JpegEncodeOptions kind(S s, bool gray = false, int restart = 0, int quality = 90) {
  JpegEncodeOptions o;
  o.subsampling = s;
  o.color = gray ? JpegColor::kGrayscale : JpegColor::kYCbCr;
  o.restart_interval = restart;
  o.quality = quality;
  return o;
}

// One image through nvJPEG's batched hardware decoder (a batch of one), full or a window.
class EngineDecoder {
 public:
  EngineDecoder() {
    check_nv(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, 0, &handle_), "create");
    check_nv(nvjpegJpegStateCreate(handle_, &state_), "state");
    check_nv(nvjpegDecodeParamsCreate(handle_, &params_), "params");
    check_nv(nvjpegDecodeParamsSetOutputFormat(params_, NVJPEG_OUTPUT_RGBI), "format");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
  }
  ~EngineDecoder() {
    cudaStreamDestroy(stream_);
    nvjpegDecodeParamsDestroy(params_);
    nvjpegJpegStateDestroy(state_);
    nvjpegDestroy(handle_);
  }
  // RGB of the window (x, y, w, h) of `jpeg`; w = h = 0 for the whole image (width x height).
  std::vector<std::uint8_t> decode(const std::vector<std::uint8_t>& jpeg, int width, int height,
                                   int x = 0, int y = 0, int w = 0, int h = 0) {
    const bool roi = w > 0;
    if (!roi) {
      w = width;
      h = height;
    }
    check_nv(
        nvjpegDecodeParamsSetROI(params_, roi ? x : 0, roi ? y : 0, roi ? w : -1, roi ? h : -1),
        "roi");
    void* out = nullptr;
    const std::size_t bytes = static_cast<std::size_t>(w) * h * 3;
    check(cudaMalloc(&out, bytes), "malloc");
    nvjpegImage_t image{};
    image.channel[0] = static_cast<unsigned char*>(out);
    image.pitch[0] = static_cast<std::size_t>(w) * 3;
    const unsigned char* data = jpeg.data();
    const std::size_t length = jpeg.size();
    check_nv(nvjpegDecodeBatchedInitialize(handle_, state_, 1, 1, NVJPEG_OUTPUT_RGBI), "init");
    check_nv(nvjpegDecodeBatchedEx(handle_, state_, &data, &length, &image, &params_, stream_),
             "decode");
    check(cudaStreamSynchronize(stream_), "sync");
    std::vector<std::uint8_t> host(bytes);
    check(cudaMemcpy(host.data(), out, bytes, cudaMemcpyDeviceToHost), "copy");
    cudaFree(out);
    return host;
  }

 private:
  nvjpegHandle_t handle_ = nullptr;
  nvjpegJpegState_t state_ = nullptr;
  nvjpegDecodeParams_t params_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

struct Agreement {
  double mean_abs = 0;
  double psnr = 0;
  int max_abs = 0;
};
Agreement compare(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) {
  double sum = 0, sq = 0;
  int worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const int d = std::abs(static_cast<int>(a[i]) - static_cast<int>(b[i]));
    sum += d;
    sq += static_cast<double>(d) * d;
    worst = std::max(worst, d);
  }
  Agreement r;
  r.mean_abs = sum / static_cast<double>(n);
  const double mse = sq / static_cast<double>(n);
  r.psnr = mse == 0 ? 99.0 : 10.0 * std::log10(255.0 * 255.0 / mse);
  r.max_abs = worst;
  return r;
}

// ---------------------------------------------------------------------------------------------
// The resize kernel

TEST(GpuResizeTest, TheKernelIsTheCpuReferenceByteForByte) {
  REQUIRE_GPU();
  const int size = 224;
  // Shrinks (antialiased), slight and large; enlargements; the identity; thin crops.
  const std::vector<std::pair<int, int>> crops = {{500, 375},  {224, 224}, {100, 80}, {37, 301},
                                                  {1200, 900}, {225, 223}, {3, 2},    {512, 64}};
  std::mt19937 rng(5);
  std::vector<std::vector<std::uint8_t>> sources;
  std::vector<CropJob> jobs;
  std::uint64_t source_bytes = 0, scratch = 0;
  for (std::size_t i = 0; i < crops.size(); ++i) {
    const auto [w, h] = crops[i];
    std::vector<std::uint8_t> px(static_cast<std::size_t>(w) * h * 3);
    for (auto& v : px) v = static_cast<std::uint8_t>(rng() & 0xFF);
    CropJob job;
    job.source = source_bytes;
    job.scratch = scratch;
    job.width = w;
    job.height = h;
    job.sample = static_cast<int>(i);
    job.flip = static_cast<int>(i % 2);
    jobs.push_back(job);
    source_bytes += px.size();
    scratch += scratch_bytes(h, size);
    sources.push_back(std::move(px));
  }
  for (const bool float32 : {false, true}) {
    SCOPED_TRACE(float32 ? "float32" : "uint8");
    std::uint8_t *d_src = nullptr, *d_scratch = nullptr;
    void* d_out = nullptr;
    CropJob* d_jobs = nullptr;
    int* d_taps = nullptr;
    const ResizeShape shape = resize_shape(jobs.data(), static_cast<int>(jobs.size()), size);
    EXPECT_EQ(shape.max_height, 900);
    check(cudaMalloc(reinterpret_cast<void**>(&d_taps), taps_bytes(shape, size)), "taps");
    const std::size_t elem = float32 ? 4 : 1;
    const std::size_t out_bytes = crops.size() * size * size * 3 * elem;
    check(cudaMalloc(reinterpret_cast<void**>(&d_src), source_bytes), "src");
    check(cudaMalloc(reinterpret_cast<void**>(&d_scratch), scratch), "scratch");
    check(cudaMalloc(&d_out, out_bytes), "out");
    check(cudaMalloc(reinterpret_cast<void**>(&d_jobs), sizeof(CropJob) * jobs.size()), "jobs");
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      check(cudaMemcpy(d_src + jobs[i].source, sources[i].data(), sources[i].size(),
                       cudaMemcpyHostToDevice),
            "upload");
    }
    check(cudaMemcpy(d_jobs, jobs.data(), sizeof(CropJob) * jobs.size(), cudaMemcpyHostToDevice),
          "jobs");
    ResizeOutput out;
    out.images = d_out;
    out.size = size;
    out.float32 = float32;
    for (int c = 0; c < 3; ++c) {
      out.mean[c] = kImageNetMean[static_cast<std::size_t>(c)];
      out.std[c] = kImageNetStd[static_cast<std::size_t>(c)];
    }
    resize_normalize(d_jobs, shape, d_src, d_taps, d_scratch, out, nullptr);
    check(cudaDeviceSynchronize(), "kernel");
    std::vector<std::uint8_t> got(out_bytes);
    check(cudaMemcpy(got.data(), d_out, out_bytes, cudaMemcpyDeviceToHost), "download");
    cudaFree(d_src);
    cudaFree(d_scratch);
    cudaFree(d_out);
    cudaFree(d_jobs);
    cudaFree(d_taps);

    std::vector<std::uint8_t> rows, ref(static_cast<std::size_t>(size) * size * 3);
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      SCOPED_TRACE("crop " + std::to_string(crops[i].first) + "x" +
                   std::to_string(crops[i].second));
      resize_reference(sources[i].data(), jobs[i].width, jobs[i].height,
                       static_cast<long>(jobs[i].width) * 3, ref.data(), size, rows);
      std::size_t mismatches = 0;
      for (int y = 0; y < size; ++y) {
        for (int x = 0; x < size; ++x) {
          const int sx = jobs[i].flip ? size - 1 - x : x;
          for (int c = 0; c < 3; ++c) {
            const std::uint8_t v = ref[(static_cast<std::size_t>(y) * size + sx) * 3 + c];
            const std::size_t at = ((i * size + y) * size + x) * 3 + c;
            if (float32) {
              float g;
              std::memcpy(&g, got.data() + at * 4, 4);
              const float want =
                  (static_cast<float>(v) / 255.0f - kImageNetMean[c]) / kImageNetStd[c];
              mismatches += g != want;
            } else {
              mismatches += got[at] != v;
            }
          }
        }
      }
      EXPECT_EQ(mismatches, 0u);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The engine

TEST(GpuEngineTest, RegionOfInterestDecodeIsTheWindowOfTheFullDecode) {
  REQUIRE_GPU();
  EngineDecoder engine;
  const cv::Mat rgb = picture(500, 375);
  for (const S s : {S::k444, S::k422, S::k420, S::k440}) {
    const auto jpeg = encode(rgb, kind(s));
    const auto full = engine.decode(jpeg, 500, 375);
    std::mt19937 rng(static_cast<unsigned>(s) + 1);
    for (int trial = 0; trial < 6; ++trial) {
      const int w = 8 + static_cast<int>(rng() % 480), h = 8 + static_cast<int>(rng() % 360);
      const int x = static_cast<int>(rng() % (500 - w + 1)),
                y = static_cast<int>(rng() % (375 - h + 1));
      SCOPED_TRACE("subsampling " + std::to_string(static_cast<int>(s)) + ", window " +
                   std::to_string(x) + "," + std::to_string(y) + " " + std::to_string(w) + "x" +
                   std::to_string(h));
      const auto window = engine.decode(jpeg, 500, 375, x, y, w, h);
      std::size_t mismatches = 0;
      for (int r = 0; r < h; ++r) {
        mismatches += std::memcmp(window.data() + static_cast<std::size_t>(r) * w * 3,
                                  full.data() + (static_cast<std::size_t>(y + r) * 500 + x) * 3,
                                  static_cast<std::size_t>(w) * 3) != 0;
      }
      EXPECT_EQ(mismatches, 0u) << "rows differing";
    }
  }
}

// Tolerance, calibrated on the H200 (nvJPEG 13.0): the engine's IDCT and colour conversion are
// not libjpeg-turbo's (islow IDCT, fancy upsampling), so pixels may differ by a few levels; the
// mean absolute difference stays <= 1 level and the PSNR >= 40 dB on every kind it takes.
TEST(GpuEngineTest, PixelsAgreeWithLibjpegTurboOnEveryKindTheEngineTakes) {
  REQUIRE_GPU();
  EngineDecoder engine;
  JpegDecoder cpu;
  struct Case {
    const char* name;
    JpegEncodeOptions options;
    int width, height;
  };
  const std::vector<Case> cases = {
      {"444", kind(S::k444), 500, 375},
      {"422", kind(S::k422), 500, 375},
      {"420", kind(S::k420), 500, 375},
      {"440", kind(S::k440), 375, 500},
      {"gray", kind(S::k420, true), 512, 384},
      {"restarts", kind(S::k420, false, 2), 333, 251},
      {"q75 odd size", kind(S::k420, false, 0, 75), 511, 341},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const auto jpeg = encode(picture(k.width, k.height, 1), k.options);
    const auto gpu = engine.decode(jpeg, k.width, k.height);
    const RgbView view = cpu.decode_full(jpeg.data(), jpeg.size(), k.name);
    ASSERT_EQ(view.width, k.width);
    std::vector<std::uint8_t> ref(static_cast<std::size_t>(k.width) * k.height * 3);
    for (int r = 0; r < k.height; ++r) {
      std::memcpy(ref.data() + static_cast<std::size_t>(r) * k.width * 3,
                  view.data + r * view.stride, static_cast<std::size_t>(k.width) * 3);
    }
    const Agreement a = compare(gpu.data(), ref.data(), ref.size());
    std::printf("[ calibrate ] %-13s mean |d| %.3f, max |d| %d, PSNR %.1f dB\n", k.name, a.mean_abs,
                a.max_abs, a.psnr);
    EXPECT_LE(a.mean_abs, 1.0);
    EXPECT_GE(a.psnr, 40.0);
  }
}

// Real photos, when WORKLOAD_TEST_JPEG_DIR names a directory of them (e.g. the sample images that
// scikit-image, scikit-learn and matplotlib ship): the same tolerance on every one the engines
// take.
TEST(GpuEngineTest, PixelsAgreeWithLibjpegTurboOnRealPhotos) {
  REQUIRE_GPU();
  const char* dir = std::getenv("WORKLOAD_TEST_JPEG_DIR");
  if (!dir || !*dir) GTEST_SKIP() << "set WORKLOAD_TEST_JPEG_DIR to a directory of JPEG photos";
  EngineDecoder engine;
  JpegDecoder cpu;
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const auto bytes = test_util::read_bytes(entry.path());
    const std::string name = entry.path().filename().string();
    if (!JpegDecoder::looks_like_jpeg(bytes.data(), bytes.size())) continue;
    const JpegHeader h = cpu.read_header(bytes.data(), bytes.size(), name);
    const RouteDecision route = hardware_route(h);
    if (route.route != DecodeRoute::kHardware || !ends_with_eoi(bytes.data(), bytes.size())) {
      std::printf("[ calibrate ] %-28s %dx%d: CPU path (%s)\n", name.c_str(), h.width, h.height,
                  route.reason);
      continue;
    }
    SCOPED_TRACE(name);
    const auto gpu = engine.decode(bytes, h.width, h.height);
    const RgbView view = cpu.decode_full(bytes.data(), bytes.size(), name);
    std::vector<std::uint8_t> ref(static_cast<std::size_t>(h.width) * h.height * 3);
    for (int r = 0; r < h.height; ++r) {
      std::memcpy(ref.data() + static_cast<std::size_t>(r) * h.width * 3,
                  view.data + r * view.stride, static_cast<std::size_t>(h.width) * 3);
    }
    const Agreement a = compare(gpu.data(), ref.data(), ref.size());
    std::printf("[ calibrate ] %-28s %dx%d: mean |d| %.3f, max |d| %d, PSNR %.1f dB\n",
                name.c_str(), h.width, h.height, a.mean_abs, a.max_abs, a.psnr);
    EXPECT_LE(a.mean_abs, 1.0);
    EXPECT_GE(a.psnr, 40.0);
    ++compared;
  }
  std::printf("[ calibrate ] %d real photos compared\n", compared);
}

// ---------------------------------------------------------------------------------------------
// The stage

class GpuDecoderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new test_util::TempDir();
    test_util::make_dataset(tmp_->path(), 3, 12, 7, 0.0);  // 36 training images
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  void SetUp() override { REQUIRE_GPU(); }

  static std::shared_ptr<const Food101Index> index(const fs::path& root = tmp_->path()) {
    return std::make_shared<const Food101Index>(Food101Index::load(root, "train"));
  }
  static LoaderOptions options(HostDType dtype = HostDType::kUInt8) {
    LoaderOptions o;
    o.batch_size = 8;
    o.workers = 2;
    o.prefetch_factor = 2;
    o.seed = 99;
    o.transform.image_size = 64;
    o.transform.dtype = dtype;
    o.decode = DecodeDevice::kGpu;
    return o;
  }
  static std::vector<std::uint8_t> host_bytes(const torch::Tensor& device_images) {
    const torch::Tensor nhwc = device_images.permute({0, 2, 3, 1}).contiguous().cpu();
    const auto* p = static_cast<const std::uint8_t*>(nhwc.data_ptr());
    return std::vector<std::uint8_t>(p, p + nhwc.numel() * nhwc.element_size());
  }
  // The next batch as host bytes, released at once.
  static std::vector<std::uint8_t> take(GpuDecoder& d, DeviceBatch* keep = nullptr) {
    DeviceBatch b = d.next();
    EXPECT_EQ(cudaEventSynchronize(b.ready()), cudaSuccess);
    auto bytes = host_bytes(b.images());
    if (keep) *keep = std::move(b);
    return bytes;
  }

  static test_util::TempDir* tmp_;
};
test_util::TempDir* GpuDecoderTest::tmp_ = nullptr;

TEST_F(GpuDecoderTest, BatchesHaveTheCpuLoadersOrderCropsFlipsAndLabels) {
  const LoaderOptions o = options();
  GpuDecoder gpu(index(), o);
  ASSERT_TRUE(gpu.info().hardware) << gpu.info().notice;
  EXPECT_GE(gpu.info().engines, 1u);
  LoaderOptions co = o;
  co.decode = DecodeDevice::kCpu;
  Loader cpu(index(), co);
  SampleTransform transform(co.transform);
  const auto idx = index();
  double worst_mean = 0;
  for (int b = 0; b < 6; ++b) {  // more than one epoch (4 batches of 8 from 36 images)
    DeviceBatch g = gpu.next();
    Batch c = cpu.next();
    ASSERT_EQ(g.epoch(), c.epoch());
    ASSERT_EQ(g.index_in_epoch(), c.index_in_epoch());
    ASSERT_EQ(g.indices(), c.indices());
    ASSERT_EQ(cudaEventSynchronize(g.ready()), cudaSuccess);
    EXPECT_TRUE(torch::equal(g.labels().cpu(), c.labels()));
    EXPECT_EQ(g.hardware_images(), g.size()) << "the synthetic set is baseline 4:2:0";
    const auto gpu_px = host_bytes(g.images());
    const auto* cpu_px = static_cast<const std::uint8_t*>(c.images().data_ptr());
    const std::size_t per = 64 * 64 * 3;
    for (std::int64_t k = 0; k < g.size(); ++k) {
      // The crop window and flip are those the CPU path draws for (seed, epoch, image).
      const std::int64_t image = c.indices()[static_cast<std::size_t>(k)];
      CounterRng rng(o.seed, static_cast<std::uint64_t>(c.epoch()),
                     static_cast<std::uint64_t>(image), CounterRng::kAugment);
      DecodeInfo info;
      std::vector<std::uint8_t> scratch(per);
      transform.apply_file((*idx)[image].path.string(), rng, scratch.data(), &info);
      const StagedImage& st = g.staged()[static_cast<std::size_t>(k)];
      EXPECT_EQ(st.params.crop, info.crop) << "sample " << k;
      CounterRng again(o.seed, static_cast<std::uint64_t>(c.epoch()),
                       static_cast<std::uint64_t>(image), CounterRng::kAugment);
      EXPECT_EQ(st.params.flip, sample_augment(again, info.image_width, info.image_height).flip);
      const Agreement a = compare(gpu_px.data() + k * per, cpu_px + k * per, per);
      worst_mean = std::max(worst_mean, a.mean_abs);
      // Same window and flip; the CPU path decodes DCT-scaled and resizes with OpenCV, the GPU
      // path decodes exactly and resizes as PIL does: close, not equal.
      EXPECT_LE(a.mean_abs, 6.0) << "sample " << k;
      EXPECT_GE(a.psnr, 25.0) << "sample " << k;
    }
  }
  std::printf("[ calibrate ] GPU vs CPU batches: worst per-image mean |d| %.2f levels\n",
              worst_mean);
  const GpuDecodeStats st = gpu.stats();
  EXPECT_EQ(st.fallback_images, 0);
  EXPECT_GE(st.hardware_images, 48);
}

TEST_F(GpuDecoderTest, DigestsAndPixelsAreTheSameWhateverTheLoaderSettings) {
  std::vector<std::uint64_t> digests[2];
  std::vector<std::uint64_t> pixels[2];
  for (int variant = 0; variant < 2; ++variant) {
    LoaderOptions o = options(HostDType::kFloat32);
    o.workers = variant == 0 ? 1 : 3;
    o.prefetch_factor = variant == 0 ? 1 : 3;
    o.work_unit = variant == 0 ? WorkUnit::kBatch : WorkUnit::kSample;
    GpuDecodeOptions g;
    g.decode_sets = variant == 0 ? 1 : 3;
    g.output_batches = variant == 0 ? 2 : 5;
    GpuDecoder d(index(), o, g);
    for (int b = 0; b < 9; ++b) {
      DeviceBatch keep;
      const auto px = take(d, &keep);
      digests[variant].push_back(keep.digest());
      pixels[variant].push_back(common::hash64(px.data(), px.size()));
    }
  }
  EXPECT_EQ(digests[0], digests[1]);
  EXPECT_EQ(pixels[0], pixels[1]);
}

TEST_F(GpuDecoderTest, NchwBatchesAreTheChannelsLastOnesInAnotherLayout) {
  for (const HostDType dtype : {HostDType::kUInt8, HostDType::kFloat32}) {
    LoaderOptions chw = options(dtype);
    chw.transform.layout = ImageLayout::kNchw;
    GpuDecoder a(index(), options(dtype)), b(index(), chw);
    for (int i = 0; i < 3; ++i) {
      DeviceBatch x = a.next(), y = b.next();
      ASSERT_EQ(cudaEventSynchronize(x.ready()), cudaSuccess);
      ASSERT_EQ(cudaEventSynchronize(y.ready()), cudaSuccess);
      EXPECT_TRUE(y.images().is_contiguous());
      EXPECT_TRUE(x.images().is_contiguous(torch::MemoryFormat::ChannelsLast));
      EXPECT_TRUE(torch::equal(x.images().cpu(), y.images().cpu())) << "batch " << i;
    }
  }
}

TEST_F(GpuDecoderTest, ReuseWaitsOnTheHostForWorkQueuedBeforeTheKernel) {
  // Queue a slow host function ahead of every resize: the next batch's hardware decode, which
  // ignores stream order, must still not overwrite the crops before the kernel has read them.
  LoaderOptions o = options();
  std::vector<std::uint64_t> plain, slowed;
  for (int variant = 0; variant < 2; ++variant) {
    GpuDecodeOptions g;
    g.decode_sets = 1;
    g.output_batches = 2;
    if (variant == 1) {
      g.before_resize = [](cudaStream_t s) {
        cudaLaunchHostFunc(
            s, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(150)); }, nullptr);
      };
    }
    GpuDecoder d(index(), o, g);
    for (int b = 0; b < 5; ++b) {
      const auto px = take(d);
      (variant == 0 ? plain : slowed).push_back(common::hash64(px.data(), px.size()));
    }
  }
  EXPECT_EQ(plain, slowed);
}

TEST_F(GpuDecoderTest, WhatTheEnginesCannotTakeIsTheCpuPathsPixels) {
  // Replace some images with kinds the engines refuse; they keep their names and labels.
  test_util::TempDir dir;
  test_util::make_dataset(dir.path(), 2, 8, 3, 0.0);
  const auto idx = index(dir.path());
  JpegEncodeOptions progressive = kind(S::k420);
  progressive.progressive = true;
  JpegEncodeOptions cmyk = kind(S::k444);
  cmyk.color = JpegColor::kCmykAdobe;
  JpegEncodeOptions arithmetic = kind(S::k420);
  arithmetic.arithmetic = true;
  const std::vector<JpegEncodeOptions> odd = {progressive, cmyk, kind(S::k411), arithmetic};
  for (std::int64_t i = 0; i < idx->size(); i += 3) {
    const auto& o = odd[static_cast<std::size_t>(i / 3) % odd.size()];
    test_util::write_file((*idx)[i].path, encode(picture(400, 300, static_cast<int>(i)), o));
  }
  LoaderOptions o = options();
  GpuDecoder gpu(idx, o);
  LoaderOptions co = o;
  co.decode = DecodeDevice::kCpu;
  Loader cpu(idx, co);
  std::int64_t fallbacks = 0;
  for (int b = 0; b < 4; ++b) {
    DeviceBatch g = gpu.next();
    Batch c = cpu.next();
    ASSERT_EQ(cudaEventSynchronize(g.ready()), cudaSuccess);
    EXPECT_TRUE(torch::equal(g.labels().cpu(), c.labels()));
    const auto gpu_px = host_bytes(g.images());
    const auto* cpu_px = static_cast<const std::uint8_t*>(c.images().data_ptr());
    const std::size_t per = 64 * 64 * 3;
    for (std::int64_t k = 0; k < g.size(); ++k) {
      const StagedImage& st = g.staged()[static_cast<std::size_t>(k)];
      if (st.route == DecodeRoute::kCpu) {
        ++fallbacks;
        EXPECT_EQ(std::memcmp(gpu_px.data() + k * per, cpu_px + k * per, per), 0)
            << "sample " << k << " (" << st.reason << ")";
      }
    }
    EXPECT_EQ(g.hardware_images() + g.fallback_images(), g.size());
  }
  EXPECT_GT(fallbacks, 0);
  const GpuDecodeStats st = gpu.stats();
  EXPECT_GT(st.fallback_reasons.count("progressive"), 0u);
  EXPECT_GT(st.fallback_reasons.count("CMYK"), 0u);
  EXPECT_GT(st.fallback_reasons.count("4:1:1 subsampling"), 0u);
  EXPECT_GT(st.fallback_reasons.count("arithmetic coding"), 0u);
}

TEST_F(GpuDecoderTest, WithoutTheEnginesEveryBatchIsTheCpuLoadersExactly) {
  for (const HostDType dtype : {HostDType::kUInt8, HostDType::kFloat32}) {
    LoaderOptions o = options(dtype);
    GpuDecodeOptions g;
    g.use_engines = false;
    GpuDecoder gpu(index(), o, g);
    EXPECT_FALSE(gpu.info().hardware);
    EXPECT_FALSE(gpu.info().notice.empty());
    LoaderOptions co = o;
    co.decode = DecodeDevice::kCpu;
    Loader cpu(index(), co);
    for (int b = 0; b < 5; ++b) {
      DeviceBatch d = gpu.next();
      Batch c = cpu.next();
      ASSERT_EQ(cudaEventSynchronize(d.ready()), cudaSuccess);
      EXPECT_EQ(d.digest(), c.digest());
      const auto px = host_bytes(d.images());
      ASSERT_EQ(px.size(),
                static_cast<std::size_t>(c.images().numel() * c.images().element_size()));
      EXPECT_EQ(std::memcmp(px.data(), c.images().data_ptr(), px.size()), 0) << "batch " << b;
    }
    EXPECT_EQ(gpu.stats().hardware_images, 0);
  }
}

TEST_F(GpuDecoderTest, BadImagesFollowThePolicyAsOnTheCpu) {
  test_util::TempDir dir;
  test_util::make_dataset(dir.path(), 2, 8, 4, 0.0);
  const auto idx = index(dir.path());
  // A stream cut short (its end-of-image marker gone) and a PNG named .jpg.
  auto bytes = test_util::read_bytes((*idx)[2].path);
  bytes.resize(bytes.size() / 2);
  test_util::write_file((*idx)[2].path, bytes);
  test_util::write_file((*idx)[5].path, {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0});
  {
    LoaderOptions o = options();
    o.on_bad_image = BadImagePolicy::kSkip;
    GpuDecoder gpu(idx, o);
    LoaderOptions co = o;
    co.decode = DecodeDevice::kCpu;
    Loader cpu(idx, co);
    for (int b = 0; b < 4; ++b) {
      DeviceBatch g = gpu.next();
      Batch c = cpu.next();
      ASSERT_EQ(g.skipped().size(), c.skipped().size());
      for (std::size_t i = 0; i < g.skipped().size(); ++i) {
        EXPECT_EQ(g.skipped()[i].path, c.skipped()[i].path);
        EXPECT_EQ(g.skipped()[i].replacement, c.skipped()[i].replacement);
      }
      ASSERT_EQ(cudaEventSynchronize(g.ready()), cudaSuccess);
      EXPECT_TRUE(torch::equal(g.labels().cpu(), c.labels()));
    }
  }
  {
    LoaderOptions o = options();
    o.shuffle = false;  // image 2 is in the first batch
    GpuDecoder gpu(idx, o);
    try {
      gpu.next();
      FAIL() << "expected a DataError";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find((*idx)[2].path.filename().string()), std::string::npos)
          << e.what();
    }
  }
}

TEST_F(GpuDecoderTest, ResetStartsTheEpochTheCpuLoaderWould) {
  LoaderOptions o = options();
  GpuDecoder gpu(index(), o);
  LoaderOptions co = o;
  co.decode = DecodeDevice::kCpu;
  Loader cpu(index(), co);
  for (int b = 0; b < 2; ++b) {
    gpu.next();
    cpu.next();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the stage run ahead
  gpu.reset();
  cpu.reset();
  for (int b = 0; b < 3; ++b) {
    DeviceBatch g = gpu.next();
    Batch c = cpu.next();
    EXPECT_EQ(g.epoch(), c.epoch());
    EXPECT_EQ(g.index_in_epoch(), c.index_in_epoch());
    EXPECT_EQ(g.indices(), c.indices());
  }
}

TEST_F(GpuDecoderTest, CancelWakesABlockedConsumer) {
  LoaderOptions o = options();
  GpuDecoder gpu(index(), o);
  gpu.next();
  gpu.cancel();
  EXPECT_THROW(
      {
        for (int i = 0; i < 100; ++i) gpu.next();
      },
      Cancelled);
}

}  // namespace
}  // namespace data_pipeline::gpu
