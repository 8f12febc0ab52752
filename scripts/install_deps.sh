#!/usr/bin/env bash
# Installs (apt) what building and testing the workload needs, when it is missing. Sourced or run by
# scripts/run.sh and scripts/test.sh. Does nothing with SKIP_APT=1 or without apt.
#
# libtorch-dev (Debian's CPU LibTorch) is skipped when another LibTorch is already configured
# (Torch_DIR, or a TorchConfig.cmake under CMAKE_PREFIX_PATH), so a CUDA LibTorch stays the one
# CMake finds.
set -euo pipefail

install_deps() {
  [ "${SKIP_APT:-0}" = 1 ] && return 0
  command -v dpkg-query >/dev/null && command -v apt-get >/dev/null || return 0
  local packages=(cmake ninja-build g++ libopencv-dev libjpeg-dev libcxxopts-dev libgtest-dev
                  nlohmann-json3-dev python3 python3-matplotlib python3-numpy python3-pytest xz-utils)
  # clang and its libFuzzer runtime, for test.sh's fuzzer build only.
  [ "${WITH_FUZZ_DEPS:-0}" = 1 ] && packages+=(clang libclang-rt-dev)
  local have_torch=0 dir
  [ -n "${Torch_DIR:-}" ] && have_torch=1
  IFS=: read -r -a dirs <<< "${CMAKE_PREFIX_PATH:-}"
  for dir in "${dirs[@]}"; do
    [ -n "$dir" ] && [ -f "$dir/Torch/TorchConfig.cmake" ] && have_torch=1
  done
  [ "$have_torch" = 0 ] && packages+=(libtorch-dev)
  local missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "install_deps: installing ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then install_deps; fi
