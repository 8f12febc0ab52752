// main() of the suites that use LibTorch: the threads a suite may use and its CPU kernel path, set
// before any test runs and said in one line, so that a result can be traced to the path it took.
//
// OMP_NUM_THREADS: LibTorch's intra-op threads (at::set_num_threads), 1 when unset. CTest sets it
//   from workload_add_gtest's THREADS and reserves as many cores (PROCESSORS), so that ctest -jN
//   never runs more busy threads than the machine has cores (a LibTorch left alone starts one per
//   core in every suite: 64 spinning threads on 16 cores under ctest -j4).
// WORKLOAD_TEST_ONEDNN=0: oneDNN (mkldnn) off, so convolutions take LibTorch's native kernels.
// ATEN_CPU_CAPABILITY (LibTorch's own: default, avx2, avx512): the ATen kernels' instruction set.
// scripts/test.sh runs the suites labelled "numerics" once more under each capability the CPU has
// and with oneDNN off.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

int threads_from_environment() {
  const char* value = std::getenv("OMP_NUM_THREADS");
  if (value == nullptr || *value == '\0') return 1;
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  if (*end != '\0' || n < 1 || n > 1024) {
    std::fprintf(stderr,
                 "torch_test_main: OMP_NUM_THREADS: expected a count in [1, 1024], got '%s'\n",
                 value);
    std::exit(2);
  }
  return static_cast<int>(n);
}

std::string environment_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  at::set_num_threads(threads_from_environment());
  const std::string onednn = environment_or("WORKLOAD_TEST_ONEDNN", "1");
  if (onednn != "0" && onednn != "1") {
    std::fprintf(stderr, "torch_test_main: WORKLOAD_TEST_ONEDNN: expected 0 or 1, got '%s'\n",
                 onednn.c_str());
    return 2;
  }
  if (onednn == "0") at::globalContext().setUserEnabledMkldnn(false);
  std::printf("[ kernels  ] ATEN_CPU_CAPABILITY=%s, oneDNN %s, intra-op threads %d\n",
              environment_or("ATEN_CPU_CAPABILITY", "(LibTorch's choice)").c_str(),
              at::globalContext().userEnabledMkldnn() ? "on" : "off", at::get_num_threads());
  return RUN_ALL_TESTS();
}
