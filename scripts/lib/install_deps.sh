#!/usr/bin/env bash
# shellcheck disable=SC2034  # its variables are read by the scripts that source it
# Sourced by scripts/run.sh and scripts/test.sh (or run alone, to install): which LibTorch the build
# uses, what apt installs for it, and what the build found.
#
#   select_libtorch    chooses the LibTorch, in this order:
#                      1. the one the user configured: Torch_DIR, or a TorchConfig.cmake under a
#                         directory of CMAKE_PREFIX_PATH;
#                      2. the CUDA LibTorch inside an installed PyTorch whose torch.version.cuda is
#                         set (torch.utils.cmake_prefix_path), so a GPU machine builds for its GPU;
#                      3. Debian's libtorch-dev (LibTorch 1.13, CPU only), installed by install_deps.
#                      Sets TORCH_CMAKE_ARGS (an array for cmake) and LIBTORCH_CHOICE (a sentence).
#   install_deps       installs the missing Debian/Ubuntu packages with apt. Does nothing with
#                      SKIP_APT=1 or without apt. When apt cannot install them (no package server),
#                      it says so and goes on: CMake then names whatever is really missing.
#   read_build_facts DIR  reads what a configured build found: BUILD_TORCH_DIR, BUILD_TORCH_VERSION,
#                      BUILD_TORCH_CUDA (ON/OFF); describe_build then prints them in a line.
#   gpu_visible        true when nvidia-smi lists a GPU.
set -euo pipefail

_deps_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib/find_python.sh
source "$_deps_dir/find_python.sh"

TORCH_CMAKE_ARGS=()
LIBTORCH_CHOICE=""
_want_debian_torch=1

select_libtorch() {
  TORCH_CMAKE_ARGS=()
  _want_debian_torch=0
  if [ -n "${Torch_DIR:-}" ]; then
    LIBTORCH_CHOICE="Torch_DIR=$Torch_DIR (set by you)"
    TORCH_CMAKE_ARGS=(-DTorch_DIR:PATH="$Torch_DIR")
    return 0
  fi
  local dir dirs=()
  IFS=: read -r -a dirs <<< "${CMAKE_PREFIX_PATH:-}"
  for dir in "${dirs[@]}"; do
    if [ -n "$dir" ] && [ -f "$dir/Torch/TorchConfig.cmake" ]; then
      LIBTORCH_CHOICE="$dir/Torch (from your CMAKE_PREFIX_PATH)"
      TORCH_CMAKE_ARGS=(-DTorch_DIR:PATH="$dir/Torch")
      return 0
    fi
  done
  local py prefix
  if py=$(find_python torch); then
    # One line: the CMake prefix when this PyTorch was built with CUDA, nothing otherwise.
    prefix=$("$py" -c 'import torch
print(torch.utils.cmake_prefix_path if torch.version.cuda else "")' 2>/dev/null || true)
    if [ -n "$prefix" ] && [ -f "$prefix/Torch/TorchConfig.cmake" ]; then
      LIBTORCH_CHOICE="$prefix/Torch (the CUDA LibTorch of $py's PyTorch)"
      TORCH_CMAKE_ARGS=(-DTorch_DIR:PATH="$prefix/Torch")
      return 0
    fi
  fi
  _want_debian_torch=1
  LIBTORCH_CHOICE="Debian's libtorch-dev (CPU only; no CUDA PyTorch found)"
  # The package's CMake files; an empty Torch_DIR would keep a stale choice from the cache.
  TORCH_CMAKE_ARGS=(-UTorch_DIR)
}

install_deps() {
  [ "${SKIP_APT:-0}" = 1 ] && return 0
  command -v dpkg-query >/dev/null && command -v apt-get >/dev/null || return 0
  local packages=(cmake ninja-build g++ libopencv-dev libjpeg-dev libcxxopts-dev libgtest-dev
                  nlohmann-json3-dev python3 python3-matplotlib python3-numpy python3-pytest xz-utils)
  # Gloo's headers, for data parallelism on the CPU with Debian's LibTorch (c10d's Gloo backend).
  [ "$_want_debian_torch" = 1 ] && packages+=(libgloo-dev)
  # test.sh's checks of the tree (scripts/dev/check_*.sh, clang-tidy's included), get_food101.sh's
  # tests (curl fetches their file:// archives), lld (test.sh's linker), and clang with its
  # libFuzzer runtime for its fuzzer build.
  [ "${WITH_TEST_DEPS:-0}" = 1 ] &&
    packages+=(clang-format clang-tidy shellcheck black flake8 mypy curl lld)
  [ "${WITH_FUZZ_DEPS:-0}" = 1 ] && packages+=(clang libclang-rt-dev)
  # Debian's LibTorch with the BLAS its package recommends (apt here installs no recommends): the
  # generic libblas3 it depends on is the reference BLAS, whose unblocked sgemm (fully connected
  # layers, LibTorch's own convolutions) made a CPU training step about twice as long, and the learning
  # suite with LibTorch's own convolutions four times as long (docs/BENCHMARKS.md, "CI's time (issue
  # 41, seventh round)"). The OpenMP build: it runs on LibTorch's own OpenMP threads
  # (OMP_NUM_THREADS), where the pthread build would start a pool of its own.
  [ "$_want_debian_torch" = 1 ] && packages+=(libtorch-dev libopenblas0-openmp)
  local missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "install_deps: installing ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  # Short network timeouts: a machine without a package server should learn it in seconds.
  local net=(-o Acquire::Retries=1 -o Acquire::http::Timeout=15 -o Acquire::https::Timeout=15)
  # APT_UNSAFE_IO=1, for a machine used once and thrown away (CI's: .ci/run sets it): dpkg unpacks
  # without syncing each file to disk. The 551 packages a bare Debian 12 needs installed in 137 s
  # instead of 160 (docs/BENCHMARKS.md, issue 41, eighth round); a crash during the install could
  # leave files half written, which is why no other machine gets it.
  local dpkg=()
  [ "${APT_UNSAFE_IO:-0}" = 1 ] && dpkg=(-o Dpkg::Options::=--force-unsafe-io)
  if ! { $sudo apt-get "${net[@]}" update -qq &&
         DEBIAN_FRONTEND=noninteractive $sudo apt-get "${net[@]}" "${dpkg[@]}" install -y -qq \
           --no-install-recommends "${missing[@]}"; }; then
    echo "install_deps: note: apt could not install ${missing[*]} (no package server?); going on" \
         "with what is installed: CMake will name anything the build really lacks" >&2
  fi
  return 0
}

read_build_facts() {  # <build dir>: sets BUILD_TORCH_DIR, BUILD_TORCH_VERSION, BUILD_TORCH_CUDA
  local cache="$1/CMakeCache.txt"
  BUILD_TORCH_DIR=$(sed -n 's/^Torch_DIR:[A-Z]*=//p' "$cache" 2>/dev/null | head -1)
  BUILD_TORCH_VERSION=$(sed -n 's/^WORKLOAD_TORCH_VERSION:INTERNAL=//p' "$cache" 2>/dev/null | head -1)
  BUILD_TORCH_CUDA=$(sed -n 's/^WORKLOAD_TORCH_CUDA:INTERNAL=//p' "$cache" 2>/dev/null | head -1)
}

describe_build() {  # after read_build_facts
  local kind="CPU only"
  [ "${BUILD_TORCH_CUDA:-}" = ON ] && kind="with CUDA"
  echo "LibTorch ${BUILD_TORCH_VERSION:-?} ($kind) from ${BUILD_TORCH_DIR:-?} [$LIBTORCH_CHOICE]"
}

gpu_visible() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '
}

# What to do when a GPU is visible but the build's LibTorch has no CUDA.
cpu_libtorch_on_gpu_message() {
  cat >&2 <<'EOF'
A GPU is visible (nvidia-smi) but this build's LibTorch has no CUDA, so it would train on the CPU.
Give the build a CUDA LibTorch, then run this again:
  - install a CUDA PyTorch (pip install torch): this script then uses its LibTorch by itself; or
  - unzip a CUDA LibTorch from https://pytorch.org and set Torch_DIR=<libtorch>/share/cmake/Torch
    (or CMAKE_PREFIX_PATH=<libtorch>).
To train on the CPU anyway, pass --device cpu (run.sh) or set ALLOW_CPU_LIBTORCH=1.
EOF
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  select_libtorch
  install_deps
fi
