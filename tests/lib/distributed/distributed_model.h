// A small model and fixed data shared by distributed_test and its worker
// (tests/lib/distributed/distributed_worker.cpp): what each rank computes, and what a single
// process computes for the same global batch.
#pragma once

#include <torch/torch.h>

#include <tuple>

namespace dist_test {

inline constexpr int kWorld = 2;           // ranks the tests launch
inline constexpr std::int64_t kBatch = 6;  // samples per rank and step
inline constexpr int kSteps = 5;           // SGD steps of the "train" scenario
inline constexpr double kLr = 0.05;
inline constexpr std::int64_t kClasses = 5;

/// Two convolutions and a linear layer, no BatchNorm (so that one process on the global batch
/// computes exactly what the ranks compute together).
struct SmallNetImpl : torch::nn::Module {
  SmallNetImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)))),
        conv2(register_module("conv2",
                              torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 6, 3).stride(2)))),
        fc(register_module("fc", torch::nn::Linear(6 * 2 * 2, kClasses))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::relu(conv1->forward(x));
    h = torch::relu(conv2->forward(h));
    return fc->forward(h.flatten(1));
  }
  torch::nn::Conv2d conv1, conv2;
  torch::nn::Linear fc;
};
TORCH_MODULE(SmallNet);

/// Samples [first, first + count) of step `step`'s global batch of kWorld * kBatch: images
/// 3 x 8 x 8 and labels, a pure function of the step.
inline std::tuple<torch::Tensor, torch::Tensor> samples(int step, std::int64_t first,
                                                        std::int64_t count) {
  auto gen = at::detail::createCPUGenerator(1000 + static_cast<std::uint64_t>(step));
  const auto x = at::randn({kWorld * kBatch, 3, 8, 8}, gen);
  const auto y = at::randint(kClasses, {kWorld * kBatch}, gen);
  return {x.narrow(0, first, count), y.narrow(0, first, count)};
}

/// Rank `rank`'s share of step `step`'s global batch.
inline std::tuple<torch::Tensor, torch::Tensor> batch(int step, int rank, std::int64_t per_rank) {
  return samples(step, rank * per_rank, per_rank);
}

}  // namespace dist_test
