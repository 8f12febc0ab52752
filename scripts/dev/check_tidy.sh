#!/usr/bin/env bash
# Checks every translation unit the build compiles in app/, lib/ and data_pipeline/ with
# clang-tidy (the checks and their reasons: .clang-tidy), using the build's compile commands; prints
# each finding once (a header's, found from many units, included) and exits 1 when there is one.
#
#   scripts/dev/check_tidy.sh [--if-available] [BUILD_DIR]      (default build/)
#
# BUILD_DIR must be configured (CMake writes its compile_commands.json). The units are those that
# build compiles: a CPU build leaves out the CUDA-only ones (a GPU build's tree checks them too).
# JOBS (default: the cores) units run at once. The reference is clang-tidy 14, Debian 12's and
# CI's; with --if-available (scripts/test.sh) a machine without it, or with another version, skips
# the check with a note.
set -euo pipefail
# shellcheck source=scripts/dev/checks.sh
source "$(dirname "$0")/checks.sh"
args=()
build_dir=build
for a in "$@"; do
  case $a in
    --*) args+=("$a") ;;
    *) build_dir=$a ;;
  esac
done
check_init check_tidy.sh "${args[@]}"
check_tool clang-tidy 14 clang-tidy
db="$build_dir/compile_commands.json"
if [ ! -f "$db" ]; then
  echo "check_tidy.sh: error: $db not found: configure $build_dir first (cmake -S . -B $build_dir)" >&2
  exit 2
fi
root=$(pwd)
mapfile -t units < <(sed -n 's/^ *"file": "\(.*\)",\{0,1\}$/\1/p' "$db" |
  sed "s|^$root/||" | grep -E '^(app|lib|data_pipeline)/.*\.cpp$' | sort -u)
if [ ${#units[@]} -eq 0 ]; then
  echo "check_tidy.sh: error: $db lists no unit of app/, lib/ or data_pipeline/" >&2
  exit 1
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
printf '%s\n' "${units[@]}" |
  xargs -P "${JOBS:-$(nproc)}" -n 1 clang-tidy -p "$build_dir" --quiet 2>/dev/null >"$out" || rc=$?
mapfile -t findings < <(grep -E '^[^ ].*:[0-9]+:[0-9]+: (warning|error): ' "$out" |
  sed "s|^$root/||" | sort -u)
if [ ${#findings[@]} -gt 0 ]; then
  printf '%s\n' "${findings[@]}"
  echo "check_tidy.sh: ${#findings[@]} finding(s) in the ${#units[@]} units of $build_dir" >&2
  exit 1
fi
if [ "$rc" != 0 ]; then
  echo "check_tidy.sh: error: clang-tidy failed (xargs status $rc) without a finding" >&2
  exit 1
fi
echo "check_tidy.sh: ${#units[@]} units pass clang-tidy"
