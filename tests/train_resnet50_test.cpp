// End-to-end tests of the train_resnet50 binary: the exact NVTX range tree (recorded by an NVTX
// injection library), worker thread names, the report, and exit codes for bad input.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/test_util.h"

namespace {

namespace fs = std::filesystem;

struct Event {
  long tid;
  std::string op;
  std::string domain;
  std::string text;
};

std::vector<Event> read_events(const fs::path& file) {
  std::vector<Event> events;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    Event e;
    std::string tid;
    std::getline(ss, tid, '\t');
    std::getline(ss, e.op, '\t');
    std::getline(ss, e.domain, '\t');
    std::getline(ss, e.text);
    e.tid = std::stol(tid);
    events.push_back(e);
  }
  return events;
}

// The expected tree in tree_with_parens' notation.
std::string expected_tree(int warmup, int steps, bool reuse) {
  const std::string step =
      "torch_step(data_load(batch_wait,h2d_submit),forward,zero_grad,backward,optimizer_step)";
  std::string out;
  for (int i = 0; i < warmup; ++i) out += (out.empty() ? "" : ",") + step;
  std::string window = reuse ? "" : "iterator_reset";
  for (int i = 0; i < steps; ++i) window += (window.empty() ? "" : ",") + step;
  window += ",capture_drain";
  out += (out.empty() ? "" : ",") + std::string("capture_window(") + window + ")";
  return out;
}

class TrainBinaryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new test_util::TempDir();
    test_util::make_dataset(tmp_->path() / "data", 3, 8, 3, 0.0);
  }
  static void TearDownTestSuite() { delete tmp_; }
  static std::vector<std::string> args(std::vector<std::string> extra) {
    std::vector<std::string> a = {WORKLOAD_TRAIN_BIN,
                                  "--data=" + (tmp_->path() / "data").string(),
                                  "--device=cpu",
                                  "--batch-size=4",
                                  "--image-size=32",
                                  "--workers=2"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  static test_util::TempDir* tmp_;
};
test_util::TempDir* TrainBinaryTest::tmp_ = nullptr;

// The default-domain push/pop events of one thread as a nested string: a(b,c),d
std::string tree_with_parens(const std::vector<Event>& events, long tid) {
  std::string out;
  std::vector<int> children;
  int top = 0;
  for (const auto& e : events) {
    if (e.tid != tid || !e.domain.empty()) continue;
    if (e.op == "push") {
      int& count = children.empty() ? top : children.back();
      out += count++ == 0 ? (children.empty() ? "" : "(") : ",";
      out += e.text;
      children.push_back(0);
    } else if (e.op == "pop") {
      if (children.empty()) return out + " <unbalanced pop>";
      if (children.back() > 0) out += ")";
      children.pop_back();
    }
  }
  if (!children.empty()) out += " <unclosed>";
  return out;
}

TEST_F(TrainBinaryTest, NvtxTreeIsExactWithAndWithoutIteratorReuse) {
  for (bool reuse : {true, false}) {
    const fs::path log = tmp_->path() / (reuse ? "nvtx_reuse.tsv" : "nvtx_reset.tsv");
    const auto r = test_util::run_process(
        args({"--warmup=2", "--steps=3", reuse ? "--reuse-iterator=true" : "--reuse-iterator=false"}),
        {std::string("NVTX_INJECTION64_PATH=") + NVTX_RECORDER_LIB,
         "NVTX_RECORDER_OUTPUT=" + log.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto events = read_events(log);
    ASSERT_FALSE(events.empty()) << "the NVTX injection recorded nothing";
    EXPECT_EQ(tree_with_parens(events, r.pid), expected_tree(2, 3, reuse));
    // Loader workers are named for NVTX and keep their ranges out of the default domain.
    std::map<long, std::string> names;
    for (const auto& e : events) {
      if (e.op == "thread_name") names[e.tid] = e.text;
    }
    int loader_threads = 0;
    for (const auto& [tid, name] : names) loader_threads += name.rfind("loader/", 0) == 0;
    EXPECT_EQ(loader_threads, 2);
    int worker_ranges = 0;
    for (const auto& e : events) {
      if (e.tid != r.pid && (e.op == "push" || e.op == "pop")) {
        EXPECT_EQ(e.domain, "data_pipeline") << "worker range outside its domain: " << e.text;
        worker_ranges += e.op == "push";
      }
    }
    EXPECT_GT(worker_ranges, 0);
  }
}

TEST_F(TrainBinaryTest, EndToEndRunWritesAValidReport) {
  const fs::path report = tmp_->path() / "report.json";
  const auto r = test_util::run_process(
      args({"--warmup=1", "--steps=2", "--image-size=64", "--report=" + report.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("summary"), std::string::npos);
  EXPECT_NE(r.out.find("images/s"), std::string::npos);
  EXPECT_NE(r.out.find("cudaProfilerStart/Stop skipped"), std::string::npos);
  std::ifstream in(report);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["capture"]["steps"], 2);
  EXPECT_EQ(j["config"]["image_size"], 64);
  EXPECT_EQ(j["steps"].size(), 2u);
  EXPECT_EQ(j["model"]["parameters"], 23508032 + 2048 * 3 + 3);  // 3 classes
  EXPECT_TRUE(j["loss_after_drain"].is_number());
}

TEST_F(TrainBinaryTest, UsageErrorsExitTwoAndNameTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--batch-size=0", "--batch-size"}, {"--steps=-2", "--steps"},
      {"--image-size=8", "--image-size"}, {"--workers=-1", "--workers"},
      {"--prefetch-factor=0", "--prefetch-factor"}, {"--nonsense", "nonsense"},
      {"--pin-memory=perhaps", "--pin-memory"}};
  for (const auto& [arg, flag] : cases) {
    const auto r = test_util::run_process(args({arg}));
    EXPECT_EQ(r.exit_code, 2) << arg << ": " << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  }
  const auto missing_value = test_util::run_process({WORKLOAD_TRAIN_BIN, "--device=cpu", "--data"});
  EXPECT_EQ(missing_value.exit_code, 2) << missing_value.err;
}

TEST_F(TrainBinaryTest, DataErrorsExitOneAndNameThePath) {
  const auto r = test_util::run_process(
      {WORKLOAD_TRAIN_BIN, "--data=" + (tmp_->path() / "nowhere").string(), "--device=cpu"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("nowhere"), std::string::npos) << r.err;
  const auto few = test_util::run_process(args({"--batch-size=100", "--steps=1", "--warmup=0"}));
  EXPECT_EQ(few.exit_code, 1) << few.err;
  EXPECT_NE(few.err.find("fewer than one batch"), std::string::npos) << few.err;
}

TEST_F(TrainBinaryTest, HelpAndVersion) {
  const auto h = test_util::run_process({WORKLOAD_TRAIN_BIN, "--help"});
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.out.find("--reuse-iterator"), std::string::npos);
  const auto v = test_util::run_process({WORKLOAD_TRAIN_BIN, "--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.out.find("train_resnet50"), std::string::npos);
}

}  // namespace
