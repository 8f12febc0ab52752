// How the model applies each BatchNorm and what follows it: LibTorch's modules (the default) or
// cuDNN's fused batch-norm kernels (--fused-bn).
#pragma once

#include <c10/util/C++17.h>  // before FunctionRef.h, which uses it without including it (1.13)
#include <c10/util/FunctionRef.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/types.h>

#include <memory>
#include <vector>

namespace workload {

/// The three places a ResNet-50 normalises: BN then ReLU (the stem and each bottleneck's first two
/// convolutions), BN then the residual add then ReLU (each bottleneck's last), and BN alone (the
/// projection shortcut). An implementation computes what the comment of each method says, with
/// `bn`'s parameters, buffers and mode (training: batch statistics, updating the running ones and
/// num_batches_tracked as the module's forward does). Implementations hold no state of their own:
/// one instance serves any number of modules, from any thread.
class NormActivation {
 public:
  virtual ~NormActivation() = default;
  /// relu(bn(x)).
  virtual torch::Tensor bn_relu(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x) const = 0;
  /// relu(bn(x) + residual()). `residual` is called once, after bn(x) has been issued where the
  /// implementation issues it separately (the modules' launch order is the step's today).
  virtual torch::Tensor bn_add_relu(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x,
                                    c10::function_ref<torch::Tensor()> residual) const = 0;
  /// bn(x).
  virtual torch::Tensor bn(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x) const = 0;
};

/// While one is alive on a thread, the fused implementation's layers hand their num_batches_tracked
/// to it instead of each adding 1 with a kernel of its own; flush() (or the end of the scope) adds
/// 1 to all of them in one multi-tensor kernel. The counters' values after the scope are the same,
/// and nothing reads them inside it (momentum is set, so the running statistics do not use them):
/// the fused forward launches 53 kernels fewer a step. The model's forward opens one; without one
/// the layers count as the modules do. Scopes nest (the innermost collects). One thread: each scope
/// belongs to the thread that made it.
class DeferredBatchCounts {
 public:
  DeferredBatchCounts();
  /// Flushes what is pending; an error there is reported on stderr, not thrown.
  ~DeferredBatchCounts();
  DeferredBatchCounts(const DeferredBatchCounts&) = delete;
  DeferredBatchCounts& operator=(const DeferredBatchCounts&) = delete;

  /// Adds 1 to every counter handed over since the last flush, in one multi-tensor operation.
  void flush();
  /// The scope collecting on this thread, or nullptr.
  static DeferredBatchCounts* current();
  /// Hands `counter` over to current(), or adds 1 to it now when there is none.
  static void count(torch::Tensor& counter);

 private:
  std::vector<torch::Tensor> pending_;
  DeferredBatchCounts* outer_;
};

/// The modules as LibTorch runs them: BatchNorm2d's forward (cuDNN at fp32, ATen's kernels under
/// bf16 autocast), torch::relu, an in-place add. What every run does without --fused-bn.
std::shared_ptr<const NormActivation> module_norm_activation();

/// cuDNN's NHWC batch norm with its fused operations (lib/model/cudnn_bn): BN+ReLU and BN+add+ReLU
/// in one forward and one backward kernel each, BN alone through the same kernels. A module in eval
/// mode, or an input it does not take (not CUDA, not 4-D, other than float/half/bfloat16, C not a
/// multiple of 4 for the add), runs as module_norm_activation() does.
/// \throws UsageError "--fused-bn: this build has no fused batch norm (<why>)" in a build without
///         lib/model/cudnn_bn (a CPU LibTorch, no cuDNN found, or a cuDNN without the legacy Ex
///         API; lib/core/build_features.h).
std::shared_ptr<const NormActivation> fused_norm_activation();

}  // namespace workload
