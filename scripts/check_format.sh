#!/usr/bin/env bash
# Checks that every C++ file of the tree follows .clang-format (Google base, 100 columns); prints
# the files that do not and exits 1. `scripts/check_format.sh --fix` formats them in place.
#
# The version matters (releases format a few constructs differently): clang-format 14, Debian 12's
# and CI's, is the reference. With --if-available (scripts/test.sh) a machine without it, or with
# another major version, skips the check with a note instead of failing.
set -euo pipefail
cd "$(dirname "$0")/.."
readonly REFERENCE_MAJOR=14
if_available=0
[ "${1:-}" = --if-available ] && { if_available=1; shift; }
skip() {
  if [ "$if_available" = 1 ]; then
    echo "check_format.sh: note: $1: the format check is skipped (CI runs it)" >&2
    exit 0
  fi
  echo "check_format.sh: error: $1" >&2
  exit 1
}
command -v clang-format >/dev/null || skip "clang-format not found (apt install clang-format)"
major=$(clang-format --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
[ "$major" = "$REFERENCE_MAJOR" ] ||
  skip "clang-format $major is not the reference version $REFERENCE_MAJOR"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.cpp' '*.h' '*.cu' '*.cuh')
else
  mapfile -t files < <(find app lib data_pipeline tests -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh')
fi
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format.sh: ${#bad[@]} file(s) do not follow .clang-format ($(clang-format --version)):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "run scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format.sh: ${#files[@]} files follow .clang-format"
