// A rank for distributed_test: launched N times by scripts/launch_local.sh, it runs a small model
// through workload::Distributed and DataParallel on the CPU (Gloo) and saves what the test checks.
//
//   distributed_worker grad OUT   one forward/backward of a small convolutional model on this
//                                 rank's own inputs, each rank starting from its own random
//                                 weights (so that the broadcast from rank 0 shows); saves the
//                                 weights after the broadcast and the gradients to
//                                 OUT/grad.rank<r>.pt
//   distributed_worker train OUT  K SGD steps of the same model (no BatchNorm) on rank r's share
//                                 of a fixed global batch per step; saves the final weights to
//                                 OUT/train.rank<r>.pt
// The model and the data come from distributed_test's header
// (tests/lib/distributed/distributed_model.h), so the test can compute the single-process answers
// itself.
#include <torch/serialize.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "lib/distributed/data_parallel.h"
#include "lib/distributed/distributed.h"
#include "lib/distributed/launch_env.h"
#include "tests/lib/distributed/distributed_model.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: distributed_worker grad|train OUT_DIR\n");
    return 2;
  }
  const std::string mode = argv[1];
  const std::string out = argv[2];
  try {
    const auto env = workload::read_launch_env();
    if (!env) throw std::runtime_error("no distributed environment");
    workload::Distributed dist(*env, workload::DistBackend::kGloo, torch::kCPU,
                               std::chrono::seconds(60));
    const int r = env->rank;
    const std::string suffix = ".rank" + std::to_string(r) + ".pt";
    if (mode == "grad") {
      torch::manual_seed(100 + r);  // different weights on every rank before the broadcast
      dist_test::SmallNet net;
      workload::DataParallel ddp(dist, *net, /*bucket_bytes=*/1 << 10, /*broadcast_buffers=*/true);
      std::vector<torch::Tensor> saved;
      for (const auto& p : net->parameters()) saved.push_back(p.detach().clone());
      const auto [x, y] = dist_test::batch(/*step=*/0, r, dist_test::kBatch);
      ddp.before_forward();
      const torch::Tensor output = net->forward(x);
      ddp.before_backward();
      torch::nn::functional::cross_entropy(output, y).backward();
      for (const auto& p : net->parameters()) saved.push_back(p.grad().clone());
      torch::save(saved, out + "/grad" + suffix);
    } else if (mode == "train") {
      torch::manual_seed(7);
      dist_test::SmallNet net;
      workload::DataParallel ddp(dist, *net, /*bucket_bytes=*/1 << 10, /*broadcast_buffers=*/true);
      torch::optim::SGD sgd(net->parameters(),
                            torch::optim::SGDOptions(dist_test::kLr).momentum(0.9));
      for (int step = 0; step < dist_test::kSteps; ++step) {
        const auto [x, y] = dist_test::batch(step, r, dist_test::kBatch);
        sgd.zero_grad();
        ddp.before_forward();
        const torch::Tensor output = net->forward(x);
        ddp.before_backward();
        torch::nn::functional::cross_entropy(output, y).backward();
        sgd.step();
      }
      std::vector<torch::Tensor> saved;
      for (const auto& p : net->parameters()) saved.push_back(p.detach().clone());
      torch::save(saved, out + "/train" + suffix);
    } else {
      throw std::runtime_error("unknown mode " + mode);
    }
    dist.barrier();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "distributed_worker: %s\n", e.what());
    return 1;
  }
  return 0;
}
