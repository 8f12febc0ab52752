#!/usr/bin/env bash
# The README's test command: installs what is missing (apt), configures, builds and runs every
# test (the GoogleTest suites and the Python tests of scripts/, all through CTest).
#
#   scripts/test.sh                 Release build in build/, all CTest suites
#   BUILD_DIR=b scripts/test.sh     another build directory
#   SKIP_APT=1 scripts/test.sh      never call apt (machines without a package mirror)
#   QUICK=1 scripts/test.sh         only the Release build's suite: no sanitizer or fuzzer builds
#   FUZZ_SECONDS=300 scripts/test.sh  fuzz longer (default 60 s)
#
# Besides the Release build (build/), it builds and runs, as CI does:
#   build-asan/  the data_pipeline tests and the loader stress test under ASan + UBSan
#   build-tsan/  the same under ThreadSanitizer (suppressions: tests/sanitizers/tsan.supp)
#   build-fuzz/  the libFuzzer target on the JPEG decode + augment path (clang), FUZZ_SECONDS long,
#                on a seed corpus of every JPEG kind
# LibTorch itself is not instrumented; the sanitizer trees build only what they test.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

log() { printf '\n== test.sh: %s\n' "$*"; }

# --- packages (Debian/Ubuntu) ----------------------------------------------------------------------
source scripts/install_deps.sh
[ "${QUICK:-0}" != 1 ] && export WITH_FUZZ_DEPS=1
install_deps

# --- configure, build, test ------------------------------------------------------------------------
configure_and_test() {  # <build dir> [extra cmake args...]
  local dir=$1
  shift
  log "configure $dir $*"
  cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" -DWORKLOAD_BUILD_TESTS=ON "$@"
  log "build $dir"
  cmake --build "$dir" -j "$JOBS"
  log "test $dir"
  ctest --test-dir "$dir" --output-on-failure ${CTEST_ARGS:-}
}

configure_and_test "$BUILD_DIR"

if [ "${QUICK:-0}" != 1 ]; then
  for kind in address thread; do
    dir="${BUILD_DIR}-${kind/address/asan}"
    dir="${dir/thread/tsan}"
    log "sanitizer build ($kind) in $dir"
    cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWORKLOAD_SANITIZE=$kind
    cmake --build "$dir" -j "$JOBS" --target sanitize_tests
    ctest --test-dir "$dir" --output-on-failure -L sanitize
  done
  if command -v clang++ >/dev/null; then
    log "fuzzer build in ${BUILD_DIR}-fuzz (${FUZZ_SECONDS:-60} s)"
    CC=clang CXX=clang++ cmake -S "$ROOT" -B "${BUILD_DIR}-fuzz" -G Ninja \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWORKLOAD_SANITIZE=fuzzer
    cmake --build "${BUILD_DIR}-fuzz" -j "$JOBS" --target fuzz_tests
    FUZZ_SECONDS=${FUZZ_SECONDS:-60} ctest --test-dir "${BUILD_DIR}-fuzz" --output-on-failure -L fuzz
  else
    echo "test.sh: clang++ not found: the fuzzer build is skipped (apt install clang libclang-rt-dev)" >&2
    exit 1
  fi
fi
log "all tests passed"
