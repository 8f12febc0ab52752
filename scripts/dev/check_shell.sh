#!/usr/bin/env bash
# Checks every shell script of the tree with shellcheck, every severity down to style: the *.sh
# files, sourced libraries included, and the files whose first line runs bash or sh (.ci/run).
#
#   scripts/dev/check_shell.sh [--if-available]
#
# The reference is shellcheck 0.9, Debian 12's and CI's; with --if-available (scripts/test.sh) a
# machine without it, or with another version, skips the check with a note. A finding is fixed,
# or silenced on its line with `# shellcheck disable=SCnnnn  # why`.
set -euo pipefail
# shellcheck source=scripts/dev/checks.sh
source "$(dirname "$0")/checks.sh"
check_init check_shell.sh "$@"
check_tool shellcheck 0.9 shellcheck
files=()
while IFS= read -r f; do
  case $f in
    *.sh) files+=("$f") ;;
    *) head -n 1 "$f" | grep -qE '^#!.*[/ ](ba)?sh( |$)' && files+=("$f") ;;
  esac
done < <(tracked_files '*.sh' '.ci/*' 'scripts/*' 'tests/*')
# -x: follow the `source` lines (their `# shellcheck source=` paths are relative to the root).
if ! shellcheck -x -S style "${files[@]}"; then
  echo "check_shell.sh: shellcheck found the above in ${#files[@]} scripts" >&2
  exit 1
fi
echo "check_shell.sh: ${#files[@]} shell scripts pass shellcheck"
