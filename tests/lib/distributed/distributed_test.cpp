// Tests of data parallelism on the CPU (Gloo, two ranks on 127.0.0.1 launched by
// scripts/launch_local.sh or started here): gradients are the ranks' mean, two ranks of B train
// like one process of 2B, train_resnet50's ranks stay in sync with their own reports and NVTX
// trees, and every failure ends every rank with a message, never a hang. On GPUs (NCCL): what a
// data-parallel CUDA graph captures of c10d (one rank), and two ranks replaying the graph of the
// DDP step in sync and training as eager DDP (two GPUs; skipped with fewer).
#include "lib/distributed/distributed.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <torch/cuda.h>
#include <torch/serialize.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "lib/core/build_features.h"
#include "lib/device/cuda_device.h"
#include "lib/distributed/data_parallel.h"
#include "tests/lib/distributed/distributed_model.h"
#include "tests/support/test_util.h"

#if defined(WORKLOAD_TORCH_CUDA) && TORCH_VERSION_MAJOR >= 2
#include <ATen/cuda/CUDAGraph.h>
#endif

namespace workload {
namespace {

namespace fs = std::filesystem;

class DistributedTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new test_util::TempDir();
    test_util::make_dataset(tmp_->path() / "data", 3, 8, 3, 0.0);  // 24 images: 12 a rank
  }
  static void TearDownTestSuite() { delete tmp_; }
  void SetUp() override {
    if (!built(Feature::kGloo)) {
      GTEST_SKIP() << "this build has no Gloo (c10d's CPU backend)";
    }
  }

  // train_resnet50's arguments for a short CPU run on the test set.
  static std::vector<std::string> train(std::vector<std::string> extra) {
    std::vector<std::string> a = {WORKLOAD_TRAIN_BIN, "--data=" + (tmp_->path() / "data").string(),
                                  "--device=cpu",     "--batch-size=3",
                                  "--image-size=32",  "--workers=1",
                                  "--quiet",          "--dist-timeout-s=20"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  // scripts/launch_local.sh N -- program...
  static std::vector<std::string> launch(int n, const std::vector<std::string>& program) {
    std::vector<std::string> a = {LAUNCH_LOCAL, std::to_string(n), "--"};
    a.insert(a.end(), program.begin(), program.end());
    return a;
  }
  // The environment of rank `rank` of `world`, as launch_local.sh sets it, for starting ranks
  // one by one (to signal or kill one of them).
  static std::vector<std::string> rank_env(int rank, int world, int port) {
    return {"RANK=" + std::to_string(rank),
            "LOCAL_RANK=" + std::to_string(rank),
            "WORLD_SIZE=" + std::to_string(world),
            "LOCAL_WORLD_SIZE=" + std::to_string(world),
            "MASTER_ADDR=127.0.0.1",
            "MASTER_PORT=" + std::to_string(port)};
  }
  static int free_port() {
    static int next = 29600 + static_cast<int>(::getpid() % 1000) * 10;
    return next++;
  }
  static nlohmann::json read_json(const fs::path& path) {
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << path;
    return nlohmann::json::parse(in);
  }
  static std::vector<torch::Tensor> load(const fs::path& path) {
    std::vector<torch::Tensor> v;
    torch::load(v, path.string());
    return v;
  }

  static test_util::TempDir* tmp_;
};
test_util::TempDir* DistributedTest::tmp_ = nullptr;

TEST_F(DistributedTest, GradientsAreTheMeanOverTheRanks) {
  const fs::path out = tmp_->path() / "grad";
  fs::create_directories(out);
  const auto r =
      test_util::run_process(launch(2, {DIST_WORKER_BIN, "grad", out.string()}), {}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto rank0 = load(out / "grad.rank0.pt"), rank1 = load(out / "grad.rank1.pt");
  ASSERT_EQ(rank0.size(), rank1.size());
  const std::size_t n = rank0.size() / 2;  // weights after the broadcast, then gradients
  // Both ranks start from rank 0's weights, though each drew its own.
  for (std::size_t i = 0; i < n; ++i) EXPECT_TRUE(torch::equal(rank0[i], rank1[i])) << i;
  // Each rank's gradient, computed here by one process from those weights.
  std::vector<std::vector<torch::Tensor>> local;
  for (int rank = 0; rank < dist_test::kWorld; ++rank) {
    dist_test::SmallNet net;
    {
      torch::NoGradGuard no_grad;
      auto params = net->parameters();
      for (std::size_t i = 0; i < n; ++i) params[i].copy_(rank0[i]);
    }
    const auto [x, y] = dist_test::batch(0, rank, dist_test::kBatch);
    torch::nn::functional::cross_entropy(net->forward(x), y).backward();
    local.emplace_back();
    for (const auto& p : net->parameters()) local.back().push_back(p.grad().clone());
  }
  for (std::size_t i = 0; i < n; ++i) {
    const torch::Tensor mean = (local[0][i] + local[1][i]) / 2;
    EXPECT_FALSE(torch::allclose(local[0][i], local[1][i])) << "the ranks' inputs differ";
    EXPECT_TRUE(torch::allclose(rank0[n + i], mean, 1e-6, 1e-7)) << "parameter " << i;
    EXPECT_TRUE(torch::equal(rank0[n + i], rank1[n + i])) << "parameter " << i;
  }
}

TEST_F(DistributedTest, TwoRanksOfBTrainLikeOneProcessOf2B) {
  const fs::path out = tmp_->path() / "train";
  fs::create_directories(out);
  const auto r =
      test_util::run_process(launch(2, {DIST_WORKER_BIN, "train", out.string()}), {}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // One process, the same initial weights and optimizer, the whole global batch each step.
  torch::manual_seed(7);
  dist_test::SmallNet net;
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(dist_test::kLr).momentum(0.9));
  for (int step = 0; step < dist_test::kSteps; ++step) {
    const auto [x, y] = dist_test::samples(step, 0, dist_test::kWorld * dist_test::kBatch);
    sgd.zero_grad();
    torch::nn::functional::cross_entropy(net->forward(x), y).backward();
    sgd.step();
  }
  const auto rank0 = load(out / "train.rank0.pt"), rank1 = load(out / "train.rank1.pt");
  const auto params = net->parameters();
  ASSERT_EQ(rank0.size(), params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::equal(rank0[i], rank1[i])) << "parameter " << i;
    const double diff = (rank0[i] - params[i]).abs().max().item<double>();
    EXPECT_LT(diff, 1e-5) << "parameter " << i;
  }
}

TEST_F(DistributedTest, TrainResnet50RanksStayInSyncAndWriteTheirOwnReports) {
  const fs::path report = tmp_->path() / "sync" / "run.json";
  fs::create_directories(report.parent_path());
  const auto r = test_util::run_process(
      launch(2, train({"--warmup=2", "--steps=3", "--report=" + report.string()})), {}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(fs::exists(report)) << "a distributed run names its reports per rank";
  const auto j0 = read_json(report.parent_path() / "run.rank0.json");
  const auto j1 = read_json(report.parent_path() / "run.rank1.json");
  for (const auto* j : {&j0, &j1}) {
    const auto& d = (*j)["dist"];
    EXPECT_EQ(d["backend"], "gloo");
    EXPECT_EQ(d["world_size"], 2);
    EXPECT_EQ(d["bucket_mb"], 25);
    EXPECT_EQ(d["broadcast_buffers"], true);
    EXPECT_EQ(d["nccl_version"], "");
    EXPECT_TRUE(d.contains("nccl_nvls_enable"));
    EXPECT_EQ((*j)["capture"]["steps"], 3);
    EXPECT_EQ((*j)["interrupted"], false);
  }
  EXPECT_EQ(j0["dist"]["rank"], 0);
  EXPECT_EQ(j1["dist"]["rank"], 1);
  // The replicas are identical after the drain; the ranks read different shards.
  EXPECT_EQ(j0["dist"]["parameter_digest"], j1["dist"]["parameter_digest"]);
  EXPECT_EQ(j0["dist"]["parameter_digest"].get<std::string>().size(), 18u);
  for (int i = 0; i < 3; ++i) EXPECT_NE(j0["steps"][i]["digest"], j1["steps"][i]["digest"]);
  // 12 images a rank, batches of 3: four batches an epoch.
  EXPECT_EQ(j0["loader"]["batches_per_epoch"], 4);
}

// --epochs under two ranks: each evaluates its unpadded shard and the counts are summed, so both
// report every test image once and the same figures; rank 0 writes the checkpoint, both resume
// from it.
TEST_F(DistributedTest, EpochRanksSumTheirEvaluationsAndShareOneCheckpoint) {
  const fs::path data = tmp_->path() / "epochs_data";
  test_util::make_dataset(data, 3, 12, 5, 0.25);  // 27 training images, 9 test: 5 and 4 a rank
  const fs::path dir = tmp_->path() / "epochs";
  fs::create_directories(dir);
  const auto run = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> a = train({"--epochs=2", "--checkpoint-dir=" + (dir / "ckpt").string(),
                                        "--report=" + (dir / (name + ".json")).string()});
    a[1] = "--data=" + data.string();
    a.insert(a.end(), extra.begin(), extra.end());
    const auto r = test_util::run_process(launch(2, a), {}, 300);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return std::make_pair(read_json(dir / (name + ".rank0.json")),
                          read_json(dir / (name + ".rank1.json")));
  };
  const auto [r0, r1] = run("full", {});
  for (const auto* j : {&r0, &r1}) {
    const auto& epochs = (*j)["training"]["epochs"];
    ASSERT_EQ(epochs.size(), 2u);
    EXPECT_EQ(epochs[1]["eval"]["images"], 9) << "every test image once, summed over the ranks";
    EXPECT_EQ(epochs[1]["steps"], 4) << "14 images a rank (padded), batches of 3";
  }
  EXPECT_EQ(r0["training"]["epochs"][1]["eval"]["top1"],
            r1["training"]["epochs"][1]["eval"]["top1"]);
  EXPECT_EQ(r0["training"]["epochs"][1]["eval"]["loss"],
            r1["training"]["epochs"][1]["eval"]["loss"]);
  EXPECT_GT(r0["training"]["epochs"][1]["checkpoint"]["bytes"], 0) << "rank 0 writes";
  EXPECT_EQ(r1["training"]["epochs"][1]["checkpoint"]["bytes"], 0) << "rank 1 does not";
  // Both ranks resume from the checkpoint after epoch 1 and end where the uninterrupted run did.
  fs::remove(dir / "ckpt" / "checkpoint-e000002.ckpt");
  const auto [s0, s1] = run("resumed", {"--resume"});
  for (const auto* j : {&s0, &s1}) {
    EXPECT_EQ((*j)["training"]["resumed_from"],
              (dir / "ckpt" / "checkpoint-e000001.ckpt").string());
    EXPECT_EQ((*j)["steps"].size(), 4u) << "only epoch 2";
  }
  EXPECT_EQ(s0["dist"]["parameter_digest"], r0["dist"]["parameter_digest"]);
  EXPECT_EQ(s1["dist"]["parameter_digest"], r1["dist"]["parameter_digest"]);
  EXPECT_EQ(s0["training"]["epochs"][1]["eval"]["loss"],
            r0["training"]["epochs"][1]["eval"]["loss"]);
}

// DataParallel's gradient_as_bucket_view, in one process (one Gloo rank): after the iterations
// the gradients of one bucket share its flat tensor (here one bucket holds them all), without it
// each has a tensor of its own, and the values are the same either way.
TEST_F(DistributedTest, WithBucketViewsTheGradientsAreTheirBuckets) {
  std::vector<std::vector<torch::Tensor>> grads(2);
  for (bool view : {false, true}) {
    LaunchEnv env;
    env.master_addr = "127.0.0.1";
    env.master_port = free_port();
    Distributed dist(env, DistBackend::kGloo, torch::kCPU, std::chrono::seconds(30));
    torch::manual_seed(7);
    dist_test::SmallNet net;
    DataParallel ddp(dist, *net, /*bucket_bytes=*/1 << 20, /*broadcast_buffers=*/true, view);
    for (int step = 0; step < 3; ++step) {  // iteration 0 in one bucket, then the rebuilt ones
      for (auto& p : net->parameters()) p.mutable_grad().reset();  // zero_grad(set_to_none)
      const auto [x, y] = dist_test::batch(step, 0, dist_test::kBatch);
      ddp.before_forward();
      const torch::Tensor output = net->forward(x);
      ddp.before_backward();
      torch::nn::functional::cross_entropy(output, y).backward();
    }
    std::set<const void*> storages;
    for (const auto& p : net->parameters()) {
      storages.insert(p.grad().storage().unsafeGetStorageImpl());
      grads[view].push_back(p.grad().clone());
    }
    EXPECT_EQ(storages.size(), view ? 1u : net->parameters().size()) << view;
    dist.finish();
  }
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (std::size_t i = 0; i < grads[0].size(); ++i) {
    EXPECT_TRUE(torch::equal(grads[0][i], grads[1][i])) << "parameter " << i;
  }
}

// --grad-bucket-view (DDP's gradient_as_bucket_view) leaves the all-reduced bucket as the gradient
// instead of copying it back: the same arithmetic, so the same replicas bit for bit.
TEST_F(DistributedTest, GradientsAsBucketViewsTrainTheSameReplicas) {
  std::vector<std::string> digests;
  for (bool view : {false, true}) {
    const fs::path report = tmp_->path() / (view ? "view" : "copy") / "run.json";
    fs::create_directories(report.parent_path());
    std::vector<std::string> flags = {"--warmup=2", "--steps=3", "--report=" + report.string()};
    if (view) flags.push_back("--grad-bucket-view");
    const auto r = test_util::run_process(launch(2, train(flags)), {}, 300);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const auto j0 = read_json(report.parent_path() / "run.rank0.json");
    const auto j1 = read_json(report.parent_path() / "run.rank1.json");
    EXPECT_EQ(j0["dist"]["grad_bucket_view"], view);
    EXPECT_EQ(j0["dist"]["parameter_digest"], j1["dist"]["parameter_digest"]) << view;
    digests.push_back(j0["dist"]["parameter_digest"].get<std::string>());
  }
  EXPECT_EQ(digests[0], digests[1]);
}

// The default-domain push/pop events of thread `tid` in a recorder file, nested: a(b,c),d.
std::string tree_of(const fs::path& file, long* main_tid, std::map<std::string, int>* ddp) {
  std::ifstream in(file);
  std::string line;
  std::vector<std::array<std::string, 4>> events;
  while (std::getline(in, line)) {
    std::array<std::string, 4> e;
    std::stringstream ss(line);
    for (auto& f : e) std::getline(ss, f, '\t');
    events.push_back(e);
  }
  *main_tid = -1;
  for (const auto& e : events) {
    if (e[1] == "push" && e[2].empty() && e[3] == "torch_step") {
      *main_tid = std::stol(e[0]);
      break;
    }
  }
  std::string out;
  std::vector<int> children;
  int top = 0;
  for (const auto& e : events) {
    if (std::stol(e[0]) != *main_tid) continue;
    if (e[2] == "ddp" && e[1] == "push") ++(*ddp)[e[3]];
    if (!e[2].empty()) continue;
    if (e[1] == "push") {
      int& count = children.empty() ? top : children.back();
      out += count++ == 0 ? (children.empty() ? "" : "(") : ",";
      out += e[3];
      children.push_back(0);
    } else if (e[1] == "pop") {
      if (children.back() > 0) out += ")";
      children.pop_back();
    }
  }
  return out;
}

TEST_F(DistributedTest, EachRankHasTheStepTreeAndDdpRangesInTheirOwnDomain) {
  const fs::path dir = tmp_->path() / "nvtx";
  fs::create_directories(dir);
  const auto r = test_util::run_process(launch(2, train({"--warmup=2", "--steps=2"})),
                                        {std::string("NVTX_INJECTION64_PATH=") + NVTX_RECORDER_LIB,
                                         "NVTX_RECORDER_OUTPUT=" + (dir / "rank%r.tsv").string()},
                                        300);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string step =
      "torch_step(data_load(batch_wait,h2d_submit),forward,zero_grad,backward,optimizer_step)";
  const std::string expected =
      step + "," + step + ",capture_window(" + step + "," + step + ",capture_drain)";
  for (int rank = 0; rank < 2; ++rank) {
    long tid = -1;
    std::map<std::string, int> ddp;
    EXPECT_EQ(tree_of(dir / ("rank" + std::to_string(rank) + ".tsv"), &tid, &ddp), expected)
        << "rank " << rank;
    EXPECT_EQ(ddp["broadcast_buffers"], 4) << "rank " << rank;  // before each forward
    EXPECT_EQ(ddp["rebuild_buckets"], 4) << "rank " << rank;
    EXPECT_EQ(ddp["capture_barrier"], 1) << "rank " << rank;
    EXPECT_GE(ddp["stop_agreement"], 4) << "rank " << rank;  // a check at every step boundary
  }
}

TEST_F(DistributedTest, SigtermToTheLauncherStopsEveryRankAtTheSameStep) {
  const fs::path report = tmp_->path() / "sigterm" / "run.json";
  fs::create_directories(report.parent_path());
  double after_signal = -1;
  const auto r = test_util::run_process_signal_on(
      launch(2,
             train({"--warmup=1", "--steps=200", "--report=" + report.string(), "--quiet=false"})),
      "[rank 1] [step   2/", SIGTERM, 300, &after_signal);
  EXPECT_EQ(r.exit_code, 143) << r.out << r.err;
  EXPECT_LT(after_signal, 30.0);
  const auto j0 = read_json(report.parent_path() / "run.rank0.json");
  const auto j1 = read_json(report.parent_path() / "run.rank1.json");
  EXPECT_EQ(j0["interrupted"], true);
  EXPECT_EQ(j1["interrupted"], true);
  EXPECT_EQ(j0["interrupt_signal"], "SIGTERM");
  EXPECT_LT(j0["capture"]["steps"].get<int>(), 200);
  EXPECT_EQ(j0["capture"]["steps"], j1["capture"]["steps"]);
  EXPECT_EQ(j0["dist"]["parameter_digest"], j1["dist"]["parameter_digest"]);
  EXPECT_NE(j0["dist"]["stop_agreed_by"].get<std::string>().find("SIGTERM"), std::string::npos);
}

TEST_F(DistributedTest, SigintToOneRankStopsAllOfThemTogether) {
  const fs::path report = tmp_->path() / "sigint" / "run.json";
  fs::create_directories(report.parent_path());
  const int port = free_port();
  const auto args =
      train({"--warmup=1", "--steps=200", "--report=" + report.string(), "--quiet=false"});
  test_util::Process rank0(args, rank_env(0, 2, port)), rank1(args, rank_env(1, 2, port));
  for (int i = 0; i < 6000 && rank1.out().find("[step   2/") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  rank1.signal(SIGINT);
  ASSERT_TRUE(rank1.wait(60)) << rank1.out();
  ASSERT_TRUE(rank0.wait(60)) << rank0.out();
  EXPECT_EQ(rank1.exit_code(), 130) << rank1.err();
  EXPECT_EQ(rank0.exit_code(), 130) << rank0.err();  // it stopped for rank 1's SIGINT
  const auto j0 = read_json(report.parent_path() / "run.rank0.json");
  const auto j1 = read_json(report.parent_path() / "run.rank1.json");
  EXPECT_EQ(j0["capture"]["steps"], j1["capture"]["steps"]);
  EXPECT_EQ(j0["dist"]["stop_agreed_by"], "rank 1: SIGINT");
  EXPECT_EQ(j0["dist"]["parameter_digest"], j1["dist"]["parameter_digest"]);
}

TEST_F(DistributedTest, AKilledRankMakesTheOtherFailWithinTheTimeout) {
  const int port = free_port();
  const auto args = train({"--warmup=1", "--steps=200", "--dist-timeout-s=10", "--quiet=false"});
  test_util::Process rank0(args, rank_env(0, 2, port)), rank1(args, rank_env(1, 2, port));
  for (int i = 0; i < 6000 && rank1.out().find("[step   1/") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  rank1.signal(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(rank0.wait(40)) << "rank 0 hangs after rank 1 died";
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count(),
            10 + 15);
  EXPECT_NE(rank0.exit_code(), 0);
  EXPECT_NE(rank0.err().find("train_resnet50 (rank 0): error:"), std::string::npos) << rank0.err();
}

TEST_F(DistributedTest, ABadImageOnOneRankEndsEveryRank) {
  test_util::TempDir bad;
  test_util::make_dataset(bad.path(), 3, 8, 3, 0.0);
  for (const auto& e : fs::recursive_directory_iterator(bad.path() / "food-101" / "images")) {
    if (e.path().filename() == "100001.jpg") test_util::write_text(e.path(), "not a jpeg");
  }
  auto args = train({"--warmup=2", "--steps=20", "--dist-timeout-s=10"});
  args[1] = "--data=" + bad.path().string();
  const auto r = test_util::run_process(launch(2, args), {}, 120);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("100001.jpg"), std::string::npos) << r.err;
  // Both ranks said why they ended.
  EXPECT_NE(r.err.find("(rank 0): error:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(rank 1): error:"), std::string::npos) << r.err;
}

TEST_F(DistributedTest, ABadEnvironmentIsAUsageErrorNamingIt) {
  struct Case {
    std::vector<std::string> env;
    std::vector<std::string> flags;
    std::string fragment;
  };
  const int port = free_port();
  const std::vector<Case> cases = {
      {{"WORLD_SIZE=2"}, {}, "RANK: required"},
      {{"WORLD_SIZE=2", "RANK=2", "LOCAL_RANK=0", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=1"},
       {},
       "RANK: expected an integer in [0, 1]"},
      // Nobody serves the store: rank 1 gives up after the timeout.
      {rank_env(1, 2, port), {"--dist-timeout-s=2"}, "MASTER_ADDR:MASTER_PORT"},
      {rank_env(0, 1, port), {"--dist-backend=nccl"}, "--dist-backend nccl"},
  };
  for (const auto& c : cases) {
    auto args = train(c.flags);
    const auto r = test_util::run_process(args, c.env, 60);
    EXPECT_EQ(r.exit_code, 2) << c.fragment << ": " << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << r.err;
    // The program's message comes first: no glog banner, no c10d log line before it.
    EXPECT_EQ(r.err.rfind("train_resnet50", 0), 0u) << r.err;
    EXPECT_LT(r.seconds, 20.0) << c.fragment;
  }
}

// One NCCL rank on this process's GPU: what a data-parallel CUDA graph records of c10d.
class NcclRankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available() || !built(Feature::kNccl)) {
      GTEST_SKIP() << "needs a CUDA device and NCCL";
    }
  }
};

// With --broadcast-buffers and more than one rank, a data-parallel graph holds the buffers'
// broadcast: c10d's coalesced broadcast records device work only (the flattening, NCCL's
// broadcast, the copies back), so it is captured, and replays without the host.
TEST_F(NcclRankTest, TheBroadcastFromRankZeroIsCapturedIntoAGraph) {
#if defined(WORKLOAD_TORCH_CUDA) && TORCH_VERSION_MAJOR >= 2
  use_cuda_device(0, false);
  StepStream stream(true);  // captured on a stream other than the legacy default one
  LaunchEnv env;
  env.master_addr = "127.0.0.1";
  env.master_port = 29900 + static_cast<int>(::getpid() % 90);
  Distributed dist(env, DistBackend::kNccl, torch::Device(torch::kCUDA, 0),
                   std::chrono::seconds(30));
  const auto on_gpu = torch::TensorOptions().device(torch::kCUDA, 0);
  std::vector<torch::Tensor> buffers = {torch::arange(5, on_gpu.dtype(torch::kFloat32)),
                                        torch::arange(3, on_gpu.dtype(torch::kInt64))};
  dist.broadcast_from_rank0(buffers);  // eagerly first, as the warm-up does
  device_synchronize();
  at::cuda::CUDAGraph graph;
  graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
  dist.broadcast_from_rank0(buffers);
  graph.capture_end();
  // Rank 0's values are the broadcast's: new ones written before a replay stay.
  buffers[0].fill_(7.0);
  graph.replay();
  graph.replay();
  device_synchronize();
  EXPECT_TRUE(buffers[0].cpu().equal(torch::full({5}, 7.0f)));
  EXPECT_TRUE(buffers[1].cpu().equal(torch::arange(3, torch::kInt64)));
  dist.finish();
#else
  GTEST_SKIP() << "CUDA graphs need a CUDA LibTorch 2.x";
#endif
}

// Two NCCL ranks, one GPU each, under scripts/launch_local.sh: eager DDP against the graph of its
// step (--broadcast-buffers on, so the buffers' broadcast is in the graph too), on the same
// batches.
// DistributedTest's data set, launcher and readers; NCCL and two GPUs rather than Gloo.
class TwoNcclRanksTest : public DistributedTest {
 protected:
  void SetUp() override {
    if (!built(Feature::kNccl)) GTEST_SKIP() << "this build has no NCCL";
    if (torch::cuda::device_count() < 2) GTEST_SKIP() << "two NCCL ranks need two GPUs";
  }
};

// The replicas stay identical (equal parameter digests after the drain) and every rank's losses
// step by step are eager DDP's within 1e-3 relative, as on one process.
TEST_F(TwoNcclRanksTest, AGraphOfTheStepKeepsTheReplicasInSyncAndTrainsAsEagerDdp) {
  std::map<bool, std::vector<nlohmann::json>> runs;
  for (bool graph : {false, true}) {
    const fs::path report = tmp_->path() / (graph ? "graph" : "eager") / "run.json";
    fs::create_directories(report.parent_path());
    std::vector<std::string> flags = {"--device=cuda", "--warmup=11",
                                      "--steps=5",     "--sync-every-step",
                                      "--quiet",       "--report=" + report.string()};
    if (graph) flags.push_back("--cuda-graph");
    // train()'s CPU flags first; the ones here override them (the last of a flag wins).
    const auto r = test_util::run_process(launch(2, train(flags)), {}, 300);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    for (int rank = 0; rank < 2; ++rank) {
      runs[graph].push_back(
          read_json(report.parent_path() / ("run.rank" + std::to_string(rank) + ".json")));
    }
  }
  const auto& eager = runs[false];
  const auto& graph = runs[true];
  EXPECT_EQ(graph[0]["dist"]["parameter_digest"], graph[1]["dist"]["parameter_digest"]);
  EXPECT_EQ(eager[0]["dist"]["parameter_digest"], eager[1]["dist"]["parameter_digest"]);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_GT(graph[rank]["capture"]["graph_capture_ms"].get<double>(), 0.0);
    ASSERT_EQ(graph[rank]["steps"].size(), 5u);
    for (int i = 0; i < 5; ++i) {
      const double e = eager[rank]["steps"][i]["loss"], g = graph[rank]["steps"][i]["loss"];
      EXPECT_NEAR(g, e, 1e-3 * std::max(1.0, std::abs(e))) << "rank " << rank << ", step " << i;
      EXPECT_EQ(graph[rank]["steps"][i]["digest"], eager[rank]["steps"][i]["digest"]);
    }
  }
}

}  // namespace
}  // namespace workload
