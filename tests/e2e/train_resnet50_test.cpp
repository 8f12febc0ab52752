// End-to-end tests of the train_resnet50 binary: the exact NVTX range tree (recorded by an NVTX
// injection library), worker thread names, the report, and exit codes for bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/test_util.h"

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

// What an experiment flag adds to or removes from the step.
struct StepShape {
  bool normalize = false;  // --host-dtype uint8
  bool layers = false;     // --nvtx-detail layers
  bool train = true;       // --mode train
  bool loss_item = false;  // --sync-every-step
};

std::string step_tree(const StepShape& s) {
  std::string data = s.normalize ? "data_load(batch_wait,h2d_submit,normalize)"
                                 : "data_load(batch_wait,h2d_submit)";
  std::string forward = "forward";
  if (s.layers) {
    const int blocks[4] = {3, 4, 6, 3};
    forward += "(stem";
    for (int l = 0; l < 4; ++l) {
      const std::string layer = "layer" + std::to_string(l + 1);
      forward += "," + layer + "(";
      for (int b = 0; b < blocks[l]; ++b)
        forward += (b ? "," : "") + layer + "." + std::to_string(b);
      forward += ")";
    }
    forward += ",fc)";
  }
  std::string out = "torch_step(" + data + "," + forward;
  if (s.train) out += ",zero_grad,backward,optimizer_step";
  if (s.loss_item) out += ",loss_item";
  return out + ")";
}

// The expected tree in tree_with_parens' notation.
std::string expected_tree(int warmup, int steps, bool reuse, const StepShape& shape = {}) {
  const std::string step = step_tree(shape);
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
    std::vector<std::string> a = {WORKLOAD_TRAIN_BIN, "--data=" + (tmp_->path() / "data").string(),
                                  "--device=cpu",     "--batch-size=4",
                                  "--image-size=32",  "--workers=2"};
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
    const auto r =
        test_util::run_process(args({"--warmup=2", "--steps=3",
                                     reuse ? "--reuse-iterator=true" : "--reuse-iterator=false"}),
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

// --epochs with --capture-at across an epoch's end: the window holds the last step of epoch 0, its
// evaluation (every evaluation step with its own batch_wait and h2d_submit) and its checkpoint, and
// the first step of epoch 1; nothing else changes the step's tree.
TEST_F(TrainBinaryTest, NvtxTreeOfAnEpochBoundaryWithEvaluationAndCheckpoint) {
  const fs::path data = tmp_->path() / "epochs_data";
  test_util::make_dataset(data, 3, 4, 3, 0.25);  // 9 training images, 3 test
  const fs::path log = tmp_->path() / "nvtx_epochs.tsv";
  std::vector<std::string> a =
      args({"--epochs=2", "--capture-at=1", "--steps=2", "--eval-batch-size=2",
            "--checkpoint-dir=" + (tmp_->path() / "epochs_ckpt").string()});
  a[1] = "--data=" + data.string();
  const auto r =
      test_util::run_process(a, {std::string("NVTX_INJECTION64_PATH=") + NVTX_RECORDER_LIB,
                                 "NVTX_RECORDER_OUTPUT=" + log.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[epoch 1/2]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[epoch 2/2]"), std::string::npos) << r.out;
  const std::string step = step_tree({});
  const std::string eval_step = "eval_step(batch_wait,h2d_submit,forward)";
  // 9 images, batch 4: 2 steps an epoch; 3 test images, batch 2: 2 evaluation steps (one short).
  const std::string eval = "eval(" + eval_step + "," + eval_step + ",eval_reduce)";
  const std::string expected = step + ",capture_window(" + step + "," + eval + ",checkpoint," +
                               step + ",capture_drain)," + step + "," + eval + ",checkpoint";
  EXPECT_EQ(tree_with_parens(read_events(log), r.pid), expected);
}

// A run SIGKILLed anywhere (in a step, an evaluation or a checkpoint's write: here 3 s into a run
// of about 8 on this machine's CPU) leaves a directory
// that --resume continues from: the newest complete checkpoint, never a half-written one.
TEST_F(TrainBinaryTest, AKilledRunResumesFromItsLastCompleteCheckpoint) {
  const fs::path data = tmp_->path() / "kill_data";
  test_util::make_dataset(data, 3, 4, 3, 0.25);
  const auto run_args = [&](const fs::path& ckpt, bool resume) {
    std::vector<std::string> a =
        args({"--epochs=3", "--quiet", "--checkpoint-dir=" + ckpt.string()});
    a[1] = "--data=" + data.string();
    if (resume) a.push_back("--resume");
    return a;
  };
  int killed = 0, tried = 0;
  for (const double after_s : {3.0}) {
    const fs::path ckpt = tmp_->path() / ("kill_ckpt_" + std::to_string(tried++));
    const auto first = test_util::run_process(run_args(ckpt, false), {}, 120, SIGKILL, after_s);
    if (first.exit_code == 0) continue;  // done before the kill
    ASSERT_EQ(first.exit_code, 128 + SIGKILL) << first.err;
    ++killed;
    const auto again = test_util::run_process(run_args(ckpt, true), {}, 120);
    ASSERT_EQ(again.exit_code, 0) << "killed after " << after_s << " s: " << again.err;
    EXPECT_NE(again.out.find("[epoch 3/3]"), std::string::npos) << again.out;
    for (const auto& entry : fs::directory_iterator(ckpt)) {
      EXPECT_NE(entry.path().extension(), ".tmp") << "the last write removes a killed one's";
    }
  }
  EXPECT_GT(killed, 0) << "every run ended before its kill: kill earlier";
  // A damaged newest checkpoint ends a resumed run before its first step: one line naming the file,
  // exit 1.
  const fs::path ckpt = tmp_->path() / "kill_ckpt_0";
  fs::path newest;
  for (const auto& entry : fs::directory_iterator(ckpt)) {
    if (entry.path().extension() == ".ckpt" && entry.path() > newest) newest = entry.path();
  }
  ASSERT_FALSE(newest.empty());
  fs::resize_file(newest, fs::file_size(newest) / 2);
  const auto bad = test_util::run_process(run_args(ckpt, true), {}, 120);
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  EXPECT_NE(bad.err.find("checkpoint " + newest.string() + ": truncated"), std::string::npos)
      << bad.err;
  EXPECT_EQ(bad.out.find("[epoch"), std::string::npos) << "no step ran";
}

TEST_F(TrainBinaryTest, NvtxOffSilencesEveryRangeAndThreadNameOfBothDomains) {
  for (const char* unit : {"--work-unit=batch", "--work-unit=sample"}) {
    const fs::path log = tmp_->path() / (std::string("nvtx_off") + unit + ".tsv");
    const fs::path report = tmp_->path() / "nvtx_off.json";
    const auto r = test_util::run_process(
        args({"--warmup=1", "--steps=2", "--nvtx=false", unit, "--report=" + report.string()}),
        {std::string("NVTX_INJECTION64_PATH=") + NVTX_RECORDER_LIB,
         "NVTX_RECORDER_OUTPUT=" + log.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The injection is loaded on the first NVTX call: with none, it writes nothing at all. (The
    // test above shows the same injection recording every range when --nvtx is on.)
    const auto events = fs::exists(log) ? read_events(log) : std::vector<Event>{};
    for (const auto& e : events) {
      ADD_FAILURE() << "NVTX event with --nvtx=false: " << e.op << " '" << e.domain << "' "
                    << e.text;
    }
    std::ifstream in(report);
    EXPECT_EQ(nlohmann::json::parse(in)["config"]["nvtx"], false);
  }
}

TEST_F(TrainBinaryTest, NvtxTreeUnderEachExperimentFlag) {
  struct Case {
    std::vector<std::string> flags;
    StepShape shape;
  };
  const std::vector<Case> cases = {
      {{"--host-dtype=uint8"}, {true, false, true, false}},
      {{"--nvtx-detail=layers"}, {false, true, true, false}},
      {{"--mode=forward"}, {false, false, false, false}},
      {{"--mode=forward", "--forward-bn=train", "--nvtx-detail=layers"},
       {false, true, false, false}},
      {{"--sync-every-step"}, {false, false, true, true}},
      {{"--host-dtype=uint8", "--mode=forward", "--sync-every-step"}, {true, false, false, true}},
  };
  int n = 0;
  for (const auto& c : cases) {
    const fs::path log = tmp_->path() / ("nvtx_case_" + std::to_string(n++) + ".tsv");
    auto a = args({"--warmup=1", "--steps=2"});
    a.insert(a.end(), c.flags.begin(), c.flags.end());
    const auto r =
        test_util::run_process(a, {std::string("NVTX_INJECTION64_PATH=") + NVTX_RECORDER_LIB,
                                   "NVTX_RECORDER_OUTPUT=" + log.string()});
    ASSERT_EQ(r.exit_code, 0) << ::testing::PrintToString(c.flags) << r.err;
    EXPECT_EQ(tree_with_parens(read_events(log), r.pid), expected_tree(1, 2, true, c.shape))
        << ::testing::PrintToString(c.flags);
  }
}

// --cuda-graph: eager warm-up steps, then one graph_capture range (before the window) holding the
// ranges whose device work it records, then steps of data_load and graph_replay only.
TEST_F(TrainBinaryTest, NvtxTreeOfACudaGraphRun) {
  const auto version = test_util::run_process({WORKLOAD_TRAIN_BIN, "--version"});
  if (version.out.find("CUDA device: yes") == std::string::npos) {
    const auto r = test_util::run_process(args({"--cuda-graph"}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--cuda-graph"), std::string::npos) << r.err;
    GTEST_SKIP() << "a CUDA graph needs a CUDA device";
  }
  for (bool uint8 : {false, true}) {
    const fs::path log = tmp_->path() / (uint8 ? "nvtx_graph_u8.tsv" : "nvtx_graph.tsv");
    const fs::path report = tmp_->path() / "graph.json";
    std::vector<std::string> a = {WORKLOAD_TRAIN_BIN, "--data=" + (tmp_->path() / "data").string(),
                                  "--device=cuda",    "--batch-size=4",
                                  "--image-size=32",  "--workers=2",
                                  "--warmup=2",       "--steps=3",
                                  "--cuda-graph",     "--report=" + report.string()};
    if (uint8) a.push_back("--host-dtype=uint8");
    const auto r =
        test_util::run_process(a, {std::string("NVTX_INJECTION64_PATH=") + NVTX_RECORDER_LIB,
                                   "NVTX_RECORDER_OUTPUT=" + log.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string warm = step_tree({uint8, false, true, false});
    const std::string captured =
        std::string(uint8 ? "normalize," : "") + "forward,zero_grad,backward,optimizer_step";
    const std::string replay = "torch_step(data_load(batch_wait,h2d_submit),graph_replay)";
    EXPECT_EQ(tree_with_parens(read_events(log), r.pid),
              warm + "," + warm + ",graph_capture(" + captured + "),capture_window(" + replay +
                  "," + replay + "," + replay + ",capture_drain)");
    std::ifstream in(report);
    const auto j = nlohmann::json::parse(in);
    EXPECT_EQ(j["config"]["cuda_graph"], true);
    EXPECT_GT(j["capture"]["graph_capture_ms"].get<double>(), 0.0);
    // What became of the graph's memset nodes (-1 only in builds that cannot read the graph).
    EXPECT_EQ(j["config"]["cuda_graph_memsets"], "kernels");
    EXPECT_GE(j["capture"]["graph_memset_kernels"].get<int>(), -1);
    EXPECT_GE(j["capture"]["graph_memset_nodes"].get<int>(), -1);
    EXPECT_TRUE(j["loss_after_drain"].is_number());
  }
  // One NCCL rank (torchrun's variables): the same tree after --cuda-graph's default warm-up, the
  // 11 eager DDP steps a data-parallel capture needs.
  const fs::path log = tmp_->path() / "nvtx_graph_ddp.tsv";
  const std::vector<std::string> a = {
      WORKLOAD_TRAIN_BIN, "--data=" + (tmp_->path() / "data").string(),
      "--device=cuda",    "--batch-size=4",
      "--image-size=32",  "--workers=2",
      "--steps=2",        "--cuda-graph",
      "--quiet"};
  const auto r = test_util::run_process(
      a, {std::string("NVTX_INJECTION64_PATH=") + NVTX_RECORDER_LIB,
          "NVTX_RECORDER_OUTPUT=" + log.string(), "RANK=0", "LOCAL_RANK=0", "WORLD_SIZE=1",
          "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(29500 + ::getpid() % 400)});
  if (r.exit_code == 2 &&
      r.err.find("--dist-backend nccl: this build does not carry it") != std::string::npos) {
    GTEST_SKIP() << r.err;
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string warm = step_tree({});
  const std::string replay = "torch_step(data_load(batch_wait,h2d_submit),graph_replay)";
  std::string expected;
  for (int i = 0; i < 11; ++i) expected += warm + ",";
  expected += "graph_capture(forward,zero_grad,backward,optimizer_step),capture_window(" + replay +
              "," + replay + ",capture_drain)";
  EXPECT_EQ(tree_with_parens(read_events(log), r.pid), expected);
}

// --fused-bn: today's step tree, the blocks' ranges of --nvtx-detail layers included, and a model
// of the same size; without CUDA (or a build without the kernels) it exits 2 naming the flag.
TEST_F(TrainBinaryTest, NvtxTreeOfAFusedBnRun) {
  const auto refused = test_util::run_process(args({"--fused-bn"}));  // --device=cpu
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("--fused-bn: "), std::string::npos) << refused.err;
  const auto version = test_util::run_process({WORKLOAD_TRAIN_BIN, "--version"});
  if (version.out.find("CUDA device: yes") == std::string::npos) {
    GTEST_SKIP() << "cuDNN's fused batch norm needs a CUDA device";
  }
  const fs::path log = tmp_->path() / "nvtx_fused_bn.tsv";
  const fs::path report = tmp_->path() / "fused_bn.json";
  const std::vector<std::string> a = {WORKLOAD_TRAIN_BIN,
                                      "--data=" + (tmp_->path() / "data").string(),
                                      "--device=cuda",
                                      "--batch-size=4",
                                      "--image-size=32",
                                      "--workers=2",
                                      "--warmup=1",
                                      "--steps=2",
                                      "--fused-bn",
                                      "--nvtx-detail=layers",
                                      "--report=" + report.string()};
  const auto r =
      test_util::run_process(a, {std::string("NVTX_INJECTION64_PATH=") + NVTX_RECORDER_LIB,
                                 "NVTX_RECORDER_OUTPUT=" + log.string()});
  if (r.exit_code == 2 && r.err.find("this build has no fused batch norm") != std::string::npos) {
    GTEST_SKIP() << r.err;
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(tree_with_parens(read_events(log), r.pid),
            expected_tree(1, 2, true, {false, true, true, false}));
  std::ifstream in(report);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["config"]["fused_bn"], true);
  EXPECT_EQ(j["model"]["parameters"], 23508032 + 2048 * 3 + 3);  // 3 classes, as unfused
  EXPECT_TRUE(j["loss_after_drain"].is_number());
}

// --decode gpu: the main thread's tree is the eager one (the stage's event wait is h2d_submit's),
// with the iterator reused or reset, and the stage's own ranges are on another thread in the
// data_pipeline domain.
TEST_F(TrainBinaryTest, NvtxTreeOfAGpuDecodeRun) {
  const auto version = test_util::run_process({WORKLOAD_TRAIN_BIN, "--version"});
  if (version.out.find("CUDA device: yes") == std::string::npos) {
    const auto r = test_util::run_process(args({"--decode=gpu"}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--decode gpu"), std::string::npos) << r.err;
    GTEST_SKIP() << "GPU decoding needs a CUDA device";
  }
  for (bool reuse : {true, false}) {
    const fs::path log = tmp_->path() / (reuse ? "nvtx_gpu_reuse.tsv" : "nvtx_gpu_reset.tsv");
    std::vector<std::string> a = {
        WORKLOAD_TRAIN_BIN, "--data=" + (tmp_->path() / "data").string(),
        "--device=cuda",    "--batch-size=4",
        "--image-size=32",  "--workers=2",
        "--warmup=1",       "--steps=2",
        "--decode=gpu",     std::string("--reuse-iterator=") + (reuse ? "true" : "false")};
    const auto r =
        test_util::run_process(a, {std::string("NVTX_INJECTION64_PATH=") + NVTX_RECORDER_LIB,
                                   "NVTX_RECORDER_OUTPUT=" + log.string()});
    if (r.exit_code == 2 && r.err.find("no GPU decode stage") != std::string::npos) {
      GTEST_SKIP() << "this build has no GPU decode stage";
    }
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto events = read_events(log);
    EXPECT_EQ(tree_with_parens(events, r.pid), expected_tree(1, 2, reuse)) << "reuse " << reuse;
    bool stage_ranges = false;
    for (const auto& e : events) {
      stage_ranges |= e.tid != r.pid && e.domain == "data_pipeline" && e.text == "gpu_decode";
    }
    EXPECT_TRUE(stage_ranges) << "reuse " << reuse;
  }
}

// --decode gpu sets CUDA_DEVICE_MAX_CONNECTIONS=32 itself before CUDA starts, unless the user set
// it: the report says which, and a user's value below 32 is kept, with a notice on stdout.
TEST_F(TrainBinaryTest, AGpuDecodeRunTakesThirtyTwoHardwareQueuesUnlessTheUserSetThem) {
  {  // Without --decode gpu the program leaves the variable alone.
    const fs::path report = tmp_->path() / "connections_cpu_decode.json";
    const auto r =
        test_util::run_process(args({"--warmup=1", "--steps=1", "--report=" + report.string()}),
                               {"CUDA_DEVICE_MAX_CONNECTIONS"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(report);
    const auto env = nlohmann::json::parse(in)["environment"];
    EXPECT_TRUE(env["cuda_device_max_connections"].is_null());
    EXPECT_TRUE(env["cuda_device_max_connections_from"].is_null());
  }
  const auto version = test_util::run_process({WORKLOAD_TRAIN_BIN, "--version"});
  if (version.out.find("CUDA device: yes") == std::string::npos) {
    GTEST_SKIP() << "GPU decoding needs a CUDA device";
  }
  struct Case {
    std::string env;  // for the child: a bare name unsets
    std::string value, from;
    bool notice;
  };
  for (const Case& c : {Case{"CUDA_DEVICE_MAX_CONNECTIONS", "32", "program", false},
                        Case{"CUDA_DEVICE_MAX_CONNECTIONS=8", "8", "environment", true}}) {
    const fs::path report = tmp_->path() / ("connections_" + c.value + ".json");
    const auto r = test_util::run_process(
        {WORKLOAD_TRAIN_BIN, "--data=" + (tmp_->path() / "data").string(), "--device=cuda",
         "--batch-size=4", "--image-size=32", "--workers=2", "--warmup=1", "--steps=2",
         "--decode=gpu", "--report=" + report.string()},
        {c.env});
    if (r.exit_code == 2 && r.err.find("no GPU decode stage") != std::string::npos) {
      GTEST_SKIP() << "this build has no GPU decode stage";
    }
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(report);
    const auto env = nlohmann::json::parse(in)["environment"];
    EXPECT_EQ(env["cuda_device_max_connections"], c.value) << c.env;
    EXPECT_EQ(env["cuda_device_max_connections_from"], c.from) << c.env;
    EXPECT_EQ(r.out.find("note: --decode gpu: CUDA_DEVICE_MAX_CONNECTIONS is") != std::string::npos,
              c.notice)
        << c.env << ": " << r.out;
  }
}

TEST_F(TrainBinaryTest, TorchProfilerTraceIsAChromeTraceWithThePhases) {
  const fs::path trace = tmp_->path() / "trace.json";
  const fs::path report = tmp_->path() / "trace_report.json";
  const auto r = test_util::run_process(
      args({"--warmup=1", "--steps=2", "--torch-profiler-trace=" + trace.string(),
            "--report=" + report.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(trace);
  ASSERT_TRUE(in.good());
  const auto j = nlohmann::json::parse(in);  // throws on invalid JSON
  ASSERT_TRUE(j.contains("traceEvents"));
  std::map<std::string, int> scopes;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("cat", "") == "user_annotation") ++scopes[e["name"].get<std::string>()];
  }
  // Only the capture window is recorded: its two steps, not the warm-up step.
  EXPECT_EQ(scopes["capture_window"], 1);
  EXPECT_EQ(scopes["torch_step"], 2);
  for (const char* phase : {"data_load", "batch_wait", "h2d_submit", "forward", "zero_grad",
                            "backward", "optimizer_step", "capture_drain"}) {
    EXPECT_EQ(scopes[phase], phase == std::string("capture_drain") ? 1 : 2) << phase;
  }
  std::ifstream rin(report);
  EXPECT_EQ(nlohmann::json::parse(rin)["capture"]["torch_profiler_trace"], trace.string());
}

TEST_F(TrainBinaryTest, SyncEveryStepReadsTheLossEachStep) {
  const fs::path report = tmp_->path() / "sync.json";
  const auto r = test_util::run_process(
      args({"--warmup=1", "--steps=3", "--sync-every-step", "--report=" + report.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(report);
  const auto j = nlohmann::json::parse(in);
  for (const auto& s : j["steps"]) EXPECT_TRUE(s["loss"].is_number());
  EXPECT_EQ(j["config"]["sync_every_step"], true);
}

// The report of a run of `flags` (with a loss each step), read back; a failed run fails the test.
nlohmann::json run_report(const std::vector<std::string>& flags, const fs::path& report) {
  std::vector<std::string> a = flags;
  a.push_back("--sync-every-step");
  a.push_back("--report=" + report.string());
  const auto r = test_util::run_process(a);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(report);
  return nlohmann::json::parse(in);
}

std::vector<double> step_values(const nlohmann::json& report, const char* key) {
  std::vector<double> out;
  for (const char* part : {"warmup", "steps"}) {
    for (const auto& s : report[part]) out.push_back(s[key].get<double>());
  }
  return out;
}

// --lr-schedule constant --lr 0.1 is the article's recipe, today's default before the schedule: the
// same losses bit for bit as that recipe with every new flag at its old value written out; the
// default (a scaled peak, warm-up, cosine) trains otherwise; the report records which schedule ran
// and each step's LR; --label-smoothing changes the loss.
TEST_F(TrainBinaryTest, TheArticlesConstantLearningRateAndTheDefaultSchedule) {
  const std::vector<std::string> run = {"--warmup=2", "--steps=3"};
  auto with = [&](std::vector<std::string> extra) {
    auto a = args(run);
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const auto article =
      run_report(with({"--lr-schedule=constant", "--lr=0.1"}), tmp_->path() / "lr_article.json");
  const auto spelled_out =
      run_report(with({"--lr-schedule=constant", "--lr=0.1", "--lr-warmup-steps=0",
                       "--momentum=0.9", "--weight-decay=0.0001", "--label-smoothing=0"}),
                 tmp_->path() / "lr_spelled_out.json");
  const auto by_default = run_report(args(run), tmp_->path() / "lr_default.json");
  const auto smoothed =
      run_report(with({"--lr-schedule=constant", "--lr=0.1", "--label-smoothing=0.1"}),
                 tmp_->path() / "lr_smoothed.json");

  const std::vector<double> losses = step_values(article, "loss");
  ASSERT_EQ(losses.size(), 5u);
  EXPECT_EQ(step_values(spelled_out, "loss"), losses);
  EXPECT_EQ(step_values(article, "lr"), std::vector<double>(5, 0.1));
  const auto& used = article["lr_schedule"];
  EXPECT_EQ(used["kind"], "constant");
  EXPECT_EQ(used["lr"], 0.1);
  EXPECT_EQ(used["scaled"], false);
  EXPECT_EQ(used["warmup_steps"], 0);
  EXPECT_EQ(used["total_steps"], 5);
  EXPECT_EQ(used["lr_on_device"], false);  // the article's step: the LR a scalar of its kernels
  EXPECT_EQ(article["config"]["lr_schedule"], "constant");
  EXPECT_EQ(article["config"]["lr"], 0.1);

  const auto& rule = by_default["lr_schedule"];
  EXPECT_EQ(rule["kind"], "cosine");
  EXPECT_EQ(rule["scaled"], true);
  EXPECT_EQ(rule["global_batch"], 4);
  EXPECT_DOUBLE_EQ(rule["lr"].get<double>(), 0.1 * 4 / 256);
  EXPECT_EQ(rule["warmup_steps"], 1);      // 25% of 5 steps, rounded
  EXPECT_EQ(rule["lr_on_device"], false);  // eager: the same kernels, the scalar changing
  EXPECT_TRUE(by_default["config"]["lr"].is_null());  // not given: the rule's, recorded above
  EXPECT_TRUE(by_default["config"]["lr_warmup_steps"].is_null());
  const std::vector<double> lrs = step_values(by_default, "lr");
  const double peak = 0.1 * 4 / 256, pi = 3.14159265358979323846;
  for (int k = 1; k < 5; ++k) {
    EXPECT_NEAR(lrs[k], peak * (1 + std::cos(pi * (k - 1) / 4.0)) / 2, 1e-12) << k;
  }
  const std::vector<double> default_losses = step_values(by_default, "loss");
  EXPECT_EQ(default_losses[0], losses[0]);  // before any update
  EXPECT_NE(default_losses[1], losses[1]);

  EXPECT_EQ(smoothed["config"]["label_smoothing"], 0.1);
  EXPECT_NE(step_values(smoothed, "loss")[0], losses[0]);
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
  EXPECT_EQ(j["capture"]["profiler_stop_ms"], 0.0);  // no cudaProfilerStop on the CPU
  EXPECT_EQ(r.out.find("  cudaProfilerStop "), std::string::npos) << r.out;
  EXPECT_EQ(j["config"]["image_size"], 64);
  EXPECT_EQ(j["steps"].size(), 2u);
  EXPECT_EQ(j["model"]["parameters"], 23508032 + 2048 * 3 + 3);  // 3 classes
  EXPECT_TRUE(j["loss_after_drain"].is_number());
}

TEST_F(TrainBinaryTest, UsageErrorsExitTwoAndNameTheFlag) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {"--batch-size=0", "--batch-size"},           {"--steps=-2", "--steps"},
      {"--image-size=8", "--image-size"},           {"--workers=-1", "--workers"},
      {"--prefetch-factor=0", "--prefetch-factor"}, {"--nonsense", "nonsense"},
      {"--pin-memory=perhaps", "--pin-memory"}};
  // The learning rate's (--lr-warmup-steps longer than the run's 11 optimizer steps).
  cases.insert(cases.end(), {{"--lr-schedule=linear", "--lr-schedule"},
                             {"--lr-warmup-steps=1000", "--lr-warmup-steps"},
                             {"--label-smoothing=2", "--label-smoothing"}});
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

// --print-config: the configuration a run of these flags would use, as its report's `config`,
// without reading the dataset or running anything; refused flags exit 2 as a run does.
TEST_F(TrainBinaryTest, PrintConfigIsTheReportsConfigAndRunsNothing) {
  const fs::path report = tmp_->path() / "print_config.json";
  const std::vector<std::string> flags = {"--warmup=1", "--steps=2", "--sync-every-step",
                                          "--report=" + report.string()};
  auto a = args(flags);
  a.push_back("--print-config");
  const auto printed = test_util::run_process(a);
  ASSERT_EQ(printed.exit_code, 0) << printed.err;
  EXPECT_FALSE(fs::exists(report));  // nothing ran
  const auto config = nlohmann::json::parse(printed.out);
  EXPECT_EQ(config["steps"], 2);
  EXPECT_EQ(config["sync_every_step"], true);
  EXPECT_EQ(config["cuda_graph"], false);
  EXPECT_EQ(config["report"], report.string());
  EXPECT_EQ(config["lr_schedule"], "cosine");
  EXPECT_TRUE(config["lr"].is_null());
  const auto ran = test_util::run_process(args(flags));
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  std::ifstream in(report);
  EXPECT_EQ(nlohmann::json::parse(in)["config"], config);
  // The dataset is not read: a missing one is the run's business.
  const auto nowhere =
      test_util::run_process({WORKLOAD_TRAIN_BIN, "--device=cpu",
                              "--data=" + (tmp_->path() / "nowhere").string(), "--print-config"});
  EXPECT_EQ(nowhere.exit_code, 0) << nowhere.err;
  const auto refused = test_util::run_process(args({"--steps=0", "--print-config"}));
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--steps"), std::string::npos) << refused.err;
  EXPECT_TRUE(refused.out.empty()) << refused.out;
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
