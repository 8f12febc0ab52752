# shellcheck shell=bash
# shellcheck disable=SC2034  # the CHECK_ variables are read by the scripts that source this
# Sourced by the scripts/dev/check_*.sh checks: their common options and file lists.
#
#   check_init NAME "$@"      parses the options every check takes and cd's to the repository root:
#                               --if-available  a missing tool, or another version than the
#                                               reference (Debian 12's, CI's), skips the check with
#                                               a note instead of failing (scripts/test.sh)
#                               --fix           the checks that can, rewrite the files in place
#                             sets CHECK_NAME, CHECK_FIX (0/1) and CHECK_IF_AVAILABLE (0/1)
#   check_skip MESSAGE        the tool is missing or another version: exit 0 with a note under
#                             --if-available, else exit 1 with the message
#   check_tool TOOL MAJOR PACKAGE
#                             check_skip unless TOOL is on PATH and its version starts with MAJOR
#                             (a release formats or reports a few constructs differently)
#   tracked_files PATTERN...  the files of the tree matching the git pathspecs, one per line
#                             (tracked and untracked, not ignored; a find outside a git checkout)

check_init() {
  CHECK_NAME=$1
  shift
  CHECK_FIX=0
  CHECK_IF_AVAILABLE=0
  while [ $# -gt 0 ]; do
    case $1 in
      --if-available) CHECK_IF_AVAILABLE=1 ;;
      --fix) CHECK_FIX=1 ;;
      -h | --help)
        sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"
        exit 0
        ;;
      *)
        echo "$CHECK_NAME: error: unknown option '$1' (--if-available, --fix, --help)" >&2
        exit 2
        ;;
    esac
    shift
  done
  cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
}

check_skip() {
  if [ "$CHECK_IF_AVAILABLE" = 1 ]; then
    echo "$CHECK_NAME: note: $1: the check is skipped (CI runs it)" >&2
    exit 0
  fi
  echo "$CHECK_NAME: error: $1" >&2
  exit 1
}

check_tool() {  # <tool> <reference version prefix> <Debian package>
  local tool=$1 want=$2 package=$3 version
  command -v "$tool" >/dev/null || check_skip "$tool not found (apt install $package)"
  version=$("$tool" --version 2>&1 | grep -o '[0-9][0-9.]*' | head -n 1)
  case $version in
    "$want" | "$want".*) ;;
    *) check_skip "$tool $version is not the reference version $want (Debian 12's)" ;;
  esac
}

tracked_files() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files --cached --others --exclude-standard -- "$@" |
      while IFS= read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done
  else
    local args=() p
    for p in "$@"; do args+=(-o -path "./$p"); done
    find . -type f \( -false "${args[@]}" \) -not -path './build*' | sed 's|^\./||'
  fi
}
