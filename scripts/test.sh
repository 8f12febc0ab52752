#!/usr/bin/env bash
# CI entry point (.ci/run): install what the build and the tests need, configure, build, run CTest.
#
# usage: scripts/test.sh [--python-only] [--no-install]
#
#   --python-only  run only the Python tests of scripts/ (scripts/python_tests.sh), no C++ build
#   --no-install   install nothing (missing packages are reported, and the build or tests fail on them)
#
# Debian packages are installed with apt-get when running as root and a package is missing. The build
# goes to $BUILD_DIR (default build/). CTest runs the GoogleTest suites and, where tests/CMakeLists.txt
# registers it, scripts/python_tests.sh; when CTest lists no Python test, this script runs them itself.
set -uo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root" || exit 1
build_dir=${BUILD_DIR:-build}

python_only=0
install=1
for arg in "$@"; do
  case "$arg" in
    --python-only) python_only=1 ;;
    --no-install) install=0 ;;
    -h | --help) awk 'NR > 2 && !/^#/ { exit } NR > 2 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "test.sh: error: expected --python-only or --no-install, got $arg" >&2; exit 2 ;;
  esac
done

python_packages=(python3-matplotlib python3-numpy python3-pytest)
build_packages=(cmake ninja-build g++ libtorch-dev libopencv-dev libjpeg-dev libcxxopts-dev nlohmann-json3-dev
  libgtest-dev)

# ensure_packages PKG...: apt-get install the ones dpkg does not report installed (root only).
ensure_packages() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  if ((install == 0)) || ! command -v apt-get >/dev/null 2>&1 || [[ $(id -u) != 0 ]]; then
    echo "test.sh: warning: missing packages not installed: ${missing[*]}" >&2
    return 0
  fi
  echo "test.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update >&2 && apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
    { echo "test.sh: error: apt-get could not install ${missing[*]}" >&2; return 1; }
}

if command -v dpkg-query >/dev/null 2>&1; then
  if ((python_only)); then
    ensure_packages "${python_packages[@]}" || exit 1
  else
    ensure_packages "${build_packages[@]}" "${python_packages[@]}" || exit 1
  fi
fi

python_args=()
((install)) || python_args=(--no-install)
if ((python_only)); then
  exec scripts/python_tests.sh "${python_args[@]}"
fi

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release || exit 1
cmake --build "$build_dir" -j "$(nproc 2>/dev/null || echo 2)" || exit 1
status=0
ctest --test-dir "$build_dir" --output-on-failure || status=$?
if ! ctest --test-dir "$build_dir" -N 2>/dev/null | grep -qi python; then
  echo "test.sh: CTest registers no Python test; running scripts/python_tests.sh" >&2
  scripts/python_tests.sh "${python_args[@]}" || status=$?
fi
exit "$status"
