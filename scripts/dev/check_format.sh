#!/usr/bin/env bash
# Checks that every C++ file of the tree follows .clang-format (Google base, 100 columns); prints
# the files that do not and exits 1.
#
#   scripts/dev/check_format.sh [--fix] [--if-available]
#
# --fix formats them in place. The version matters (releases format a few constructs differently):
# clang-format 14, Debian 12's and CI's, is the reference; with --if-available (scripts/test.sh) a
# machine without it, or with another major version, skips the check with a note.
set -euo pipefail
# shellcheck source=scripts/dev/checks.sh
source "$(dirname "$0")/checks.sh"
check_init check_format.sh "$@"
check_tool clang-format 14 clang-format
mapfile -t files < <(tracked_files '*.cpp' '*.h' '*.cu' '*.cuh')
if [ "$CHECK_FIX" = 1 ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
# One process for every file: a start of clang-format costs about 0.1 s, more than a file's check.
# Only when that fails are the files checked one by one, to name each that does not follow.
bad=()
if ! clang-format --dry-run -Werror "${files[@]}" >/dev/null 2>&1; then
  for f in "${files[@]}"; do
    clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
fi
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format.sh: ${#bad[@]} file(s) do not follow .clang-format ($(clang-format --version)):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "run scripts/dev/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format.sh: ${#files[@]} files follow .clang-format"
