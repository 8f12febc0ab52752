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
PACKAGES=(cmake ninja-build g++ libtorch-dev libopencv-dev libjpeg-dev libcxxopts-dev libgtest-dev
          nlohmann-json3-dev python3 python3-matplotlib python3-numpy python3-pytest xz-utils)
if [ "${SKIP_APT:-0}" != 1 ] && command -v dpkg-query >/dev/null && command -v apt-get >/dev/null; then
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

# --- configure, build, test ------------------------------------------------------------------------
configure_and_test() {  # <build dir> [extra cmake args...]
  local dir=$1
  shift
  log "configure $dir $*"
  cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@"
  log "build $dir"
  cmake --build "$dir" -j "$JOBS"
  log "test $dir"
  ctest --test-dir "$dir" --output-on-failure ${CTEST_ARGS:-}
}

configure_and_test "$BUILD_DIR"
log "all tests passed"
