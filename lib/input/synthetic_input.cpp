// Synthetic batches as the step's input source (lib/input/synthetic_input.h).
#include "lib/input/synthetic_input.h"

#include "common/hash64.h"

namespace workload {

namespace dp = data_pipeline;

SyntheticInput::SyntheticInput(const dp::LoaderOptions& lo, std::int64_t num_classes,
                               torch::Device device) {
  const auto s = lo.transform.image_size;
  torch::manual_seed(lo.seed + 1);
  torch::Tensor host =
      lo.transform.dtype == dp::HostDType::kUInt8
          ? torch::randint(256, {lo.batch_size, s, s, 3}, torch::kUInt8).permute({0, 3, 1, 2})
          : torch::randn({lo.batch_size, s, s, 3}).permute({0, 3, 1, 2});
  if (lo.transform.layout == dp::ImageLayout::kNchw) {
    host = host.contiguous();  // the same values, NCHW in memory
  }
  torch::Tensor labels = torch::randint(num_classes, {lo.batch_size}, torch::kInt64);
  std::uint64_t digest = common::hash64(labels.data_ptr(), labels.numel() * 8,
                                        static_cast<std::uint64_t>(labels.numel()));
  digest = common::hash64(host.data_ptr(), host.numel() * host.element_size(), digest);
  info_ = Info(digest, lo.batch_size);
  inputs_.images = host.to(device);  // keeps the strides: channels_last or NCHW
  inputs_.labels = labels.to(device);
  inputs_.persistent = true;
}

}  // namespace workload
