#!/usr/bin/env bash
# The README's test command: installs what is missing (apt), configures, builds and runs every
# test (the GoogleTest suites and the Python tests of scripts/, all through CTest).
#
#   scripts/test.sh                 Release build in build/, all CTest suites
#   BUILD_DIR=b scripts/test.sh     another build directory
#   SKIP_APT=1 scripts/test.sh      never call apt (without a package server, apt's failure is only
#                                   a note anyway: CMake names what is really missing)
#   QUICK=1 scripts/test.sh         only the Release build's suite: no sanitizer or fuzzer builds
#   CTEST_JOBS=1 scripts/test.sh    the suites one at a time (default 2 at once; a suite that fails
#                                   beside another is run again alone)
#   FUZZ_SECONDS=300 scripts/test.sh  fuzz longer (default 60 s)
#
# The LibTorch is chosen as scripts/run.sh chooses it (scripts/install_deps.sh): on a GPU machine
# with a CUDA PyTorch installed, its LibTorch, so the CUDA test cases run; a GPU machine with only a
# CPU LibTorch is an error (ALLOW_CPU_LIBTORCH=1 to test on the CPU anyway). First, every C++ file
# must follow .clang-format (scripts/check_format.sh; skipped with a note where clang-format 14 is
# missing). Besides the Release build (build/), it
# builds and runs, as CI does:
#   build-asan/  the data_pipeline tests and the loader stress test under ASan + UBSan
#   build-tsan/  the same under ThreadSanitizer (suppressions: tests/support/sanitizers/tsan.supp)
#   build-fuzz/  the libFuzzer target on the JPEG decode + augment path (clang), FUZZ_SECONDS long,
#                on a seed corpus of every JPEG kind
# LibTorch itself is not instrumented; the sanitizer trees build only what they test.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
CTEST_JOBS=${CTEST_JOBS:-2}

log() { printf '\n== test.sh: %s\n' "$*"; }

# --- packages (Debian/Ubuntu), LibTorch -----------------------------------------------------------
source scripts/install_deps.sh
select_libtorch
export WITH_TEST_DEPS=1
[ "${QUICK:-0}" != 1 ] && export WITH_FUZZ_DEPS=1
install_deps

log "format"
scripts/check_format.sh --if-available

# --- configure, build, test ------------------------------------------------------------------------
configure_and_test() {  # <build dir> [extra cmake args...]
  local dir=$1
  shift
  log "configure $dir $*"
  cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
    -DWORKLOAD_BUILD_TESTS=ON "${TORCH_CMAKE_ARGS[@]}" "$@"
  read_build_facts "$dir"
  log "$(describe_build)"
  # On a GPU machine the CUDA test cases must run: refuse a CPU LibTorch there.
  if gpu_visible && [ "$BUILD_TORCH_CUDA" != ON ] && [ "${ALLOW_CPU_LIBTORCH:-0}" != 1 ]; then
    cpu_libtorch_on_gpu_message
    exit 1
  fi
  log "build $dir"
  cmake --build "$dir" -j "$JOBS"
  log "test $dir"
  # Two suites at a time (most of the long ones wait on timeouts, sockets and child processes, not
  # the CPU: 8.6 min against 14.1 one at a time on CI's 2 cores; two, not nproc, so that a GPU
  # machine's suites do not all share its GPU at once). A suite that fails beside another is run
  # again alone, and must pass there.
  # shellcheck disable=SC2086  # CTEST_ARGS is a list of ctest flags
  if ! ctest --test-dir "$dir" --output-on-failure -j "$CTEST_JOBS" ${CTEST_ARGS:-}; then
    log "test $dir: the failed suites again, one at a time"
    ctest --test-dir "$dir" --output-on-failure --rerun-failed ${CTEST_ARGS:-}
  fi
}

configure_and_test "$BUILD_DIR"

if [ "${QUICK:-0}" != 1 ]; then
  for kind in address thread; do
    dir="${BUILD_DIR}-${kind/address/asan}"
    dir="${dir/thread/tsan}"
    log "sanitizer build ($kind) in $dir"
    cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWORKLOAD_SANITIZE=$kind \
      "${TORCH_CMAKE_ARGS[@]}"
    cmake --build "$dir" -j "$JOBS" --target sanitize_tests
    ctest --test-dir "$dir" --output-on-failure -L sanitize
  done
  if command -v clang++ >/dev/null; then
    log "fuzzer build in ${BUILD_DIR}-fuzz (${FUZZ_SECONDS:-60} s)"
    CC=clang CXX=clang++ cmake -S "$ROOT" -B "${BUILD_DIR}-fuzz" -G Ninja \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWORKLOAD_SANITIZE=fuzzer "${TORCH_CMAKE_ARGS[@]}"
    cmake --build "${BUILD_DIR}-fuzz" -j "$JOBS" --target fuzz_tests
    FUZZ_SECONDS=${FUZZ_SECONDS:-60} ctest --test-dir "${BUILD_DIR}-fuzz" --output-on-failure -L fuzz
  else
    echo "test.sh: clang++ not found: the fuzzer build is skipped (apt install clang libclang-rt-dev)" >&2
    exit 1
  fi
fi
log "all tests passed"
