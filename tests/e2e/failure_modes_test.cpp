// End-to-end failure modes of train_resnet50: every bad input is one clear message with exit 1
// (data) or 2 (usage) and never a crash; every JPEG kind trains; SIGINT/SIGTERM/SIGHUP stop
// cleanly; no output replaces a dataset file. And food101_synth's --out: it replaces no dataset.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>

#include "data_pipeline/synthetic/jpeg_encoder.h"
#include "data_pipeline/synthetic/synthetic_food.h"
#include "tests/support/test_util.h"

#if defined(WORKLOAD_HAVE_IMGCODECS)
#include <opencv2/imgcodecs.hpp>
#endif

namespace {

namespace fs = std::filesystem;
namespace dp = data_pipeline;
using test_util::ProcessResult;

std::string contents_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A process that ended the way a failure must: status `code`, a message on stderr containing
// every fragment, no abort, no uncaught exception, within seconds.
void expect_clean_failure(const ProcessResult& r, int code,
                          const std::vector<std::string>& fragments, const std::string& what) {
  EXPECT_EQ(r.exit_code, code) << what << "\nstderr: " << r.err;
  EXPECT_FALSE(r.timed_out) << what;
  EXPECT_LT(r.seconds, 30.0) << what;
  for (const auto& f : fragments) {
    EXPECT_NE(r.err.find(f), std::string::npos) << what << ": stderr lacks '" << f << "':\n"
                                                << r.err;
  }
  for (const char* bad : {"terminate called", "Aborted", "core dumped", "Segmentation"}) {
    EXPECT_EQ(r.err.find(bad), std::string::npos) << what << ": " << r.err;
  }
}

class FailureModesTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = test_util::make_dataset(tmp_.path() / "data", 2, 6, 9, 0.0); }
  fs::path dataset() const { return root_ / "food-101"; }
  fs::path image(int i) const {  // the i-th image of the train split
    std::ifstream in(dataset() / "meta" / "train.txt");
    std::string line;
    for (int k = 0; k <= i; ++k) std::getline(in, line);
    return dataset() / "images" / (line + ".jpg");
  }
  ProcessResult train(std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {WORKLOAD_TRAIN_BIN, "--data=" + root_.string(),
                                  "--device=cpu",     "--batch-size=4",
                                  "--image-size=32",  "--workers=2",
                                  "--warmup=1",       "--steps=1",
                                  "--quiet"};
    a.insert(a.end(), extra.begin(), extra.end());
    return test_util::run_process(a, {}, 120);
  }
  test_util::TempDir tmp_;
  fs::path root_;
};

TEST_F(FailureModesTest, DatasetLayoutDefects) {
  expect_clean_failure(test_util::run_process({WORKLOAD_TRAIN_BIN, "--device=cpu",
                                               "--data=" + (tmp_.path() / "missing").string()}),
                       1, {"missing", "not found"}, "missing root");
  for (const char* meta : {"classes.txt", "train.txt"}) {
    const fs::path f = dataset() / "meta" / meta;
    const auto saved = test_util::read_bytes(f);
    fs::remove(f);
    expect_clean_failure(train(), 1, {std::string("meta/") + meta, "not found"}, meta);
    test_util::write_file(f, saved);
  }
  fs::remove(dataset() / "meta" / "test.txt");
  expect_clean_failure(train({"--split=test"}), 1, {"meta/test.txt", "not found"}, "test.txt");
}

TEST_F(FailureModesTest, SplitFileDefectsNameTheLine) {
  const fs::path train_txt = dataset() / "meta" / "train.txt";
  test_util::write_text(train_txt, "\n\n");
  expect_clean_failure(train(), 1, {"train.txt", "lists no images"}, "empty split");
  test_util::write_text(train_txt, "apple_pie/100000\npizza/1\n");
  expect_clean_failure(train(), 1, {"train.txt:2", "unknown class 'pizza'"}, "unknown class");
  test_util::write_text(train_txt, "apple_pie/100000\napple_pie/999\n");
  expect_clean_failure(train(), 1, {"train.txt:2", "image not found", "999.jpg"}, "absent image");
  fs::create_directories(dataset() / "images" / "apple_pie" / "dir.jpg");
  test_util::write_text(train_txt, "apple_pie/dir\n");
  expect_clean_failure(train(), 1, {"train.txt:1", "directory"}, "directory as image");
}

TEST_F(FailureModesTest, UndecodableImagesNameTheFile) {
  struct Case {
    const char* name;
    std::vector<std::uint8_t> bytes;
    const char* fragment;
  };
  auto truncated = test_util::read_bytes(image(0));
  truncated.resize(truncated.size() / 2);
  std::vector<std::uint8_t> random(5000);
  for (std::size_t i = 0; i < random.size(); ++i)
    random[i] = static_cast<std::uint8_t>(i * 7919 % 251);
  const std::string text = "<html>not an image</html>\n";
  const std::vector<Case> cases = {
      {"zero-byte", {}, "empty file"},
      {"truncated", truncated, "truncated"},
      {"random bytes", random, "cannot decode"},
      {"text", std::vector<std::uint8_t>(text.begin(), text.end()), "cannot decode"},
  };
  for (const auto& c : cases) {
    const fs::path victim = image(1);
    const auto saved = test_util::read_bytes(victim);
    test_util::write_file(victim, c.bytes);
    const auto r = train({"--batch-size=12"});  // the whole split: the victim is in batch 0
#if !defined(WORKLOAD_HAVE_IMGCODECS)
    const char* fragment = std::string(c.fragment) == "cannot decode" ? "not a JPEG" : c.fragment;
#else
    const char* fragment = c.fragment;
#endif
    expect_clean_failure(r, 1, {victim.filename().string(), fragment}, c.name);
    // With --on-bad-image=skip the same run trains and reports the file.
    const fs::path report = tmp_.path() / "skip.json";
    const auto skip =
        train({"--batch-size=12", "--on-bad-image=skip", "--report=" + report.string()});
    EXPECT_EQ(skip.exit_code, 0) << c.name << ": " << skip.err;
    std::ifstream in(report);
    const auto j = nlohmann::json::parse(in);
    EXPECT_GE(j["skipped_images"].size(), 1u) << c.name;
    EXPECT_EQ(j["skipped_images"][0]["path"], victim.string());
    EXPECT_NE(skip.out.find("images skipped"), std::string::npos) << skip.out;
    test_util::write_file(victim, saved);
  }
}

TEST_F(FailureModesTest, FewerImagesThanOneBatch) {
  expect_clean_failure(train({"--batch-size=13"}), 1, {"train.txt", "fewer than one batch"},
                       "small split");
}

TEST_F(FailureModesTest, BadFlagsAreUsageErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--batch-size=0", "--batch-size"},
      {"--batch-size=-1", "--batch-size"},
      {"--steps=0", "--steps"},
      {"--prefetch-factor=0", "--prefetch-factor"},
      {"--image-size=16", "--image-size"},
      {"--workers=-2", "--workers"},
      {"--warmup=-1", "--warmup"},
      {"--unknown-flag", "unknown-flag"},
      {"--report=" + (tmp_.path() / "no" / "r.json").string(), "--report"},
      {"--device=cuda", "--device cuda"},
      {"--print-config=no-thanks", "--print-config: expected true or false, got 'no-thanks'"},
      {"--version=2", "--version: expected true or false, got '2'"},
  };
  for (const auto& [arg, fragment] : cases) {
#if defined(WORKLOAD_TORCH_CUDA)
    if (arg == "--device=cuda") continue;  // a CUDA build may well have a GPU
#endif
    expect_clean_failure(train({arg}), 2, {fragment}, arg);
  }
  expect_clean_failure(test_util::run_process({WORKLOAD_TRAIN_BIN, "--device=cpu", "--steps"}), 2,
                       {"steps"}, "flag without its value");
  // A request that is false is no request: the run's own flags are then checked (and must hold).
  expect_clean_failure(test_util::run_process({WORKLOAD_TRAIN_BIN, "--device=cpu", "--help=false"}),
                       2, {"--data: required"}, "--help=false");
  const auto printed = train({"--print-config=no"});
  EXPECT_EQ(printed.exit_code, 0) << printed.err;
  EXPECT_NE(printed.out.find("summary ("), std::string::npos) << "--print-config=no trains";
}

TEST_F(FailureModesTest, AbsurdBatchIsAClearMemoryError) {
  // 4,098 ring slots of 12 images of 4096 x 4096: terabytes, refused before any thread starts.
  expect_clean_failure(
      train({"--batch-size=12", "--image-size=4096", "--workers=64", "--prefetch-factor=64"}), 1,
      {"batch ring", "host memory"}, "absurd ring");
}

TEST_F(FailureModesTest, EveryJpegKindAndOddMetaFilesTrain) {
  // Replace the split with one image of each kind, CRLF line endings and blank lines.
  using S = dp::ChromaSubsampling;
  struct Kind {
    const char* name;
    int w, h;
    S sub;
    bool progressive, arithmetic;
    int restart;
    dp::JpegColor color;
  };
  const Kind kinds[] = {
      {"baseline420", 512, 384, S::k420, false, false, 0, dp::JpegColor::kYCbCr},
      {"baseline444", 384, 512, S::k444, false, false, 0, dp::JpegColor::kYCbCr},
      {"s422", 500, 400, S::k422, false, false, 0, dp::JpegColor::kYCbCr},
      {"s411", 480, 360, S::k411, false, false, 0, dp::JpegColor::kYCbCr},
      {"progressive", 512, 400, S::k420, true, false, 0, dp::JpegColor::kYCbCr},
      {"restart", 512, 384, S::k420, false, false, 2, dp::JpegColor::kYCbCr},
      {"arithmetic", 512, 384, S::k420, false, true, 0, dp::JpegColor::kYCbCr},
      {"gray", 400, 300, S::k420, false, false, 0, dp::JpegColor::kGrayscale},
      {"cmyk", 400, 300, S::k444, false, false, 0, dp::JpegColor::kCmykAdobe},
      {"ycck", 400, 300, S::k420, false, false, 0, dp::JpegColor::kYcckAdobe},
      {"large", 4000, 3000, S::k420, false, false, 0, dp::JpegColor::kYCbCr},
      {"tiny", 24, 16, S::k420, false, false, 0, dp::JpegColor::kYCbCr},
  };
  std::string split = "\r\n";
  int n = 0;
  for (const auto& k : kinds) {
    cv::Mat rgb;
    cv::resize(dp::make_synthetic_food_image(1, 0, n), rgb, cv::Size(k.w, k.h));
    dp::JpegEncodeOptions o;
    o.subsampling = k.sub;
    o.progressive = k.progressive;
    o.arithmetic = k.arithmetic;
    o.restart_interval = k.restart;
    o.color = k.color;
    std::vector<std::uint8_t> bytes;
    if (k.color == dp::JpegColor::kGrayscale) {
      cv::Mat g;
      cv::cvtColor(rgb, g, cv::COLOR_RGB2GRAY);
      bytes = dp::encode_jpeg(g.data, g.cols, g.rows, 1, g.step[0], o);
    } else if (k.color == dp::JpegColor::kYCbCr) {
      bytes = dp::encode_jpeg(rgb.data, rgb.cols, rgb.rows, 3, rgb.step[0], o);
    } else {
      cv::Mat cmyk;
      cv::cvtColor(rgb, cmyk, cv::COLOR_RGB2RGBA);  // inverted inks with K = 255 (no black ink)
      cmyk.forEach<cv::Vec4b>([](cv::Vec4b& p, const int*) { p[3] = 255; });
      bytes = dp::encode_jpeg(cmyk.data, cmyk.cols, cmyk.rows, 4, cmyk.step[0], o);
    }
    test_util::write_file(dataset() / "images" / "apple_pie" / (std::string(k.name) + ".jpg"),
                          bytes);
    split += std::string("apple_pie/") + k.name + "\r\n\r\n";
    ++n;
  }
#if defined(WORKLOAD_HAVE_IMGCODECS)
  std::vector<std::uint8_t> png;
  cv::imencode(".png", dp::make_synthetic_food_image(1, 0, 99), png);
  test_util::write_file(dataset() / "images" / "apple_pie" / "png_inside.jpg", png);
  split += "apple_pie/png_inside";  // and no final newline
  ++n;
#endif
  test_util::write_text(dataset() / "meta" / "train.txt", split);
  test_util::write_text(dataset() / "meta" / "classes.txt", "apple_pie\r\nbaby_back_ribs\r\n");
  const auto r = train({"--batch-size=" + std::to_string(n), "--warmup=1", "--steps=2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

class SignalTest : public FailureModesTest, public ::testing::WithParamInterface<int> {};

const char* signal_label(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "?";
}

TEST_P(SignalTest, StopsAtOnceAndWritesAPartialReport) {
  const int sig = GetParam();
  // "At once" is a step in flight, the drain and the report, then the process's exit, which a busy
  // machine stretches: the bound adds the program's start and exit measured now.
  const double start = test_util::start_and_exit_seconds(WORKLOAD_TRAIN_BIN);
  for (const char* phase : {"[warmup 2/", "[step   2/"}) {
    const fs::path report = tmp_.path() / "interrupted.json";
    fs::remove(report);
    double after_signal = -1;
    const auto r = test_util::run_process_signal_on(
        {WORKLOAD_TRAIN_BIN, "--data=" + root_.string(), "--device=cpu", "--batch-size=4",
         "--image-size=32", "--workers=2", "--warmup=3", "--steps=1000",
         "--report=" + report.string()},
        phase, sig, 120, &after_signal);
    ASSERT_GE(after_signal, 0) << "never reached " << phase << "\n" << r.out << r.err;
    EXPECT_EQ(r.exit_code, 128 + sig) << phase << ": " << r.err;
    EXPECT_LT(after_signal, 2.0 + start) << phase << "; start and exit alone: " << start << " s";
    std::ifstream in(report);
    ASSERT_TRUE(in.good()) << "no partial report after " << phase;
    const auto j = nlohmann::json::parse(in);
    EXPECT_EQ(j["interrupted"], true);
    EXPECT_EQ(j["interrupt_signal"], signal_label(sig));
    EXPECT_LT(j["steps"].size(), 1000u);
    EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  }
}

// Nsight Systems preloads an injection library that starts threads before main() with the default
// signal mask; a process-directed signal can land on one of them. FOREIGN_THREAD_LIB does the same.
// The run must still stop cleanly: exit 128 + signal, a partial report, the capture closed.
TEST_P(SignalTest, StopsCleanlyWhenAThreadItDidNotStartTakesTheSignal) {
  const int sig = GetParam();
  const fs::path report = tmp_.path() / "interrupted_foreign.json";
  const double start = test_util::start_and_exit_seconds(WORKLOAD_TRAIN_BIN);
  double after_signal = -1;
  const auto r = test_util::run_process_signal_on(
      {WORKLOAD_TRAIN_BIN, "--data=" + root_.string(), "--device=cpu", "--batch-size=4",
       "--image-size=32", "--workers=2", "--warmup=1", "--steps=1000",
       "--report=" + report.string()},
      "[step   2/", sig, 120, &after_signal, {std::string("LD_PRELOAD=") + FOREIGN_THREAD_LIB});
  ASSERT_GE(after_signal, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("foreign_thread: started"), std::string::npos)
      << "preload not loaded: " << r.err;
  EXPECT_EQ(r.exit_code, 128 + sig) << r.err;
  EXPECT_LT(after_signal, 2.0 + start) << "start and exit alone: " << start << " s";
  std::ifstream in(report);
  ASSERT_TRUE(in.good()) << "no partial report: the signal killed the process\n" << r.err;
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["interrupted"], true);
  EXPECT_NE(r.out.find("summary"), std::string::npos) << r.out;
}

// A second signal ends the process at once, without waiting for the step in flight.
TEST_P(SignalTest, ASecondSignalExitsAtOnce) {
  const int sig = GetParam();
  const fs::path report = tmp_.path() / "never.json";
  double after_signal = -1;
  // 128 px on the CPU: a step takes over a second. The first signal comes as captured step 2
  // begins, so a graceful stop would still be waiting for that step when the second one comes.
  const auto r = test_util::run_process_signal_on(
      {WORKLOAD_TRAIN_BIN, "--data=" + root_.string(), "--device=cpu", "--batch-size=8",
       "--image-size=128", "--workers=1", "--warmup=1", "--steps=1000",
       "--report=" + report.string()},
      "[step   1/", sig, 120, &after_signal, {}, 0.2);
  ASSERT_GE(after_signal, 0) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 128 + sig) << r.err;
  EXPECT_NE(r.err.find("stopping (again to exit at once)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(report)) << "the run finished its stop instead of exiting";
  EXPECT_EQ(r.out.find("summary"), std::string::npos) << r.out;
}

// SIGHUP (a closed terminal or SSH session) stops a run as SIGTERM does.
INSTANTIATE_TEST_SUITE_P(IntTermAndHup, SignalTest, ::testing::Values(SIGINT, SIGTERM, SIGHUP),
                         [](const auto& info) { return std::string(signal_label(info.param)); });

// What stands at an output path is never replaced unless it is a regular file: /dev/null keeps
// working as an output and stays a device; /dev/full fails naming it, after the run, exit 1; a
// symlink is followed; a directory where a temporary file might go changes nothing; one path for
// both outputs is refused before the run.
TEST_F(FailureModesTest, OutputPathsAreWrittenWithoutReplacingWhatIsNotAFile) {
  struct stat st {};
  auto r = train({"--report=/dev/null"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null replaced by a file";
  expect_clean_failure(train({"--report=/dev/full"}), 1, {"--report /dev/full: write failed"},
                       "/dev/full");
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));

  fs::create_directory(tmp_.path() / "real");
  test_util::write_text(tmp_.path() / "real" / "r.json", "old");
  fs::create_symlink(tmp_.path() / "real" / "r.json", tmp_.path() / "link.json");
  r = train({"--report=" + (tmp_.path() / "link.json").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(tmp_.path() / "link.json")));
  std::ifstream in(tmp_.path() / "real" / "r.json");
  EXPECT_EQ(nlohmann::json::parse(in)["program"], "train_resnet50");

  fs::create_directory(tmp_.path() / "x.json.tmp");
  r = train({"--report=" + (tmp_.path() / "x.json").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(tmp_.path() / "x.json"));

  const std::string same = (tmp_.path() / "same.json").string();
  expect_clean_failure(train({"--report=" + same, "--torch-profiler-trace=" + same}), 2,
                       {"--torch-profiler-trace " + same + ": the same file as --report"},
                       "one path for both");
}

// A stdout whose reader is gone (`| head`): the run goes on and writes its report, exit 0.
TEST_F(FailureModesTest, AClosedStdoutPipeDoesNotEndTheRun) {
  const std::string report = (tmp_.path() / "piped.json").string();
  const std::string status = (tmp_.path() / "status").string();
  // `true` exits at once, so every write to the pipe fails (SIGPIPE by default).
  auto r = test_util::run_process(
      {"/bin/sh", "-c", "(\"$0\" \"$@\"; echo $? > '" + status + "') | true", WORKLOAD_TRAIN_BIN,
       "--data=" + root_.string(), "--device=cpu", "--batch-size=4", "--image-size=32",
       "--workers=2", "--warmup=1", "--steps=2", "--report=" + report},
      {}, 120);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(contents_of(status), "0\n") << "the run's own status; stderr: " << r.err;
  std::ifstream in(report);
  ASSERT_TRUE(in.good()) << "no report: " << r.err;
  EXPECT_EQ(nlohmann::json::parse(in)["program"], "train_resnet50");
}

// An output never replaces what a run reads: a file of the dataset stays as it was (the refusal
// itself, and the checkpoint directory's files, are train_cli_test's).
TEST_F(FailureModesTest, AnOutputOverADatasetFileIsRefusedAndTheFileKept) {
  const fs::path list = dataset() / "meta" / "train.txt";
  const std::string before = contents_of(list);
  expect_clean_failure(train({"--report=" + list.string()}), 2,
                       {"--report " + list.string() + ": inside the dataset --data"},
                       "a report over the split's list");
  EXPECT_EQ(contents_of(list), before);
}

TEST_F(FailureModesTest, RunningOutOfMemoryNamesTheFlags) {
  // A batch of 65,536 224-px images is 39 GB as float32; under a 20 GB address-space limit (so that
  // a machine with that much memory fails too) the allocation fails, and the message names the
  // flags to lower, not only the allocator's words.
  const auto r = test_util::run_process(
      {"/bin/sh", "-c", "ulimit -v 20000000 && exec \"$0\" \"$@\"", WORKLOAD_TRAIN_BIN,
       "--device=cpu", "--synthetic", "--batch-size=65536", "--warmup=0", "--steps=1"},
      {"OMP_NUM_THREADS=1"});
  expect_clean_failure(r, 1,
                       {"train_resnet50: error: out of host memory (",
                        " at --batch-size 65536 and --image-size 224: lower --batch-size"},
                       "a batch too large for memory");
}

// food101_synth writes a new dataset only: an existing one (its own or a real one) is kept whole.
TEST_F(FailureModesTest, FoodSynthReplacesNoDatasetAndNamesABadOut) {
  const fs::path list = dataset() / "meta" / "train.txt";
  const std::string before = contents_of(list);
  const auto synth = [](const std::string& out) {
    return test_util::run_process(
        {WORKLOAD_SYNTH_BIN, "--out=" + out, "--classes=2", "--per-class=2", "--threads=1"});
  };
  expect_clean_failure(synth(root_.string()), 2,
                       {"--out " + root_.string() + ": " + dataset().string() + " exists"},
                       "over an existing food-101/");
  EXPECT_EQ(contents_of(list), before);
  test_util::write_text(tmp_.path() / "file", "x");
  expect_clean_failure(synth((tmp_.path() / "file").string()), 2, {": not a directory"},
                       "a file as --out");
  expect_clean_failure(synth(""), 2, {"--out: expected a directory path"}, "an empty --out");
  expect_clean_failure(
      synth((tmp_.path() / "file" / "below").string()), 2,
      {"--out " + (tmp_.path() / "file" / "below").string() + ": cannot create the directory"},
      "an --out below a file");
  const auto fresh = synth((tmp_.path() / "fresh").string());
  EXPECT_EQ(fresh.exit_code, 0) << fresh.err;
  EXPECT_TRUE(fs::is_regular_file(tmp_.path() / "fresh" / "food-101" / "meta" / "train.txt"));
}

}  // namespace
