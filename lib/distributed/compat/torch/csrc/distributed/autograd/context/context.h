// Stand-in for a LibTorch header that Debian's libtorch-dev does not ship (pytorch#88006) but
// c10d's reducer.hpp includes: the two names reducer.hpp takes from it, declared as LibTorch
// declares them. Only on the include path when the real header is missing (lib/CMakeLists.txt);
// nothing here is ever defined or called (distributed autograd is not used).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

namespace torch::distributed::autograd {

class DistAutogradContext {
 public:
  using GradCallback = std::function<bool(at::Tensor&)>;
};

using ContextPtr = std::shared_ptr<DistAutogradContext>;

}  // namespace torch::distributed::autograd
