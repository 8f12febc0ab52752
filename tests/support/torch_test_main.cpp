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
// but the main pass's, the first of those with oneDNN off.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <gtest/gtest.h>

#include <cctype>
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

// The ATen CPU capability the kernels run with, as at::show_config() says it ("CPU capability
// usage: AVX2"), in ATEN_CPU_CAPABILITY's words: default, avx2, avx512. LibTorch chooses it itself
// when the variable is unset (LibTorch 1.13 takes avx2 on a CPU that has AVX-512), and the choice
// has no exported accessor in every version. scripts/test.sh reads it to leave out of the numerics
// passes the capability its main pass already ran.
std::string capability_in_use() {
  const std::string config = at::show_config();
  const std::string key = "CPU capability usage: ";
  const auto pos = config.find(key);
  if (pos == std::string::npos) return "unknown";
  const auto begin = pos + key.size();
  std::string name = config.substr(begin, config.find('\n', begin) - begin);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name == "no avx" ? "default" : name;
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
  std::printf(
      "[ kernels  ] ATen CPU capability %s (ATEN_CPU_CAPABILITY %s), oneDNN %s, "
      "intra-op threads %d\n",
      capability_in_use().c_str(),
      environment_or("ATEN_CPU_CAPABILITY", "unset: LibTorch's choice").c_str(),
      at::globalContext().userEnabledMkldnn() ? "on" : "off", at::get_num_threads());
  return RUN_ALL_TESTS();
}
