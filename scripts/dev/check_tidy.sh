#!/usr/bin/env bash
# Checks every translation unit the build compiles in app/, lib/ and data_pipeline/ with
# clang-tidy (the checks and their reasons: .clang-tidy), using the build's compile commands; prints
# each finding once (a header's, found from many units, included) and exits 1 when there is one.
#
#   scripts/dev/check_tidy.sh [--if-available] [--record FILE [--update-record]] [BUILD_DIR]
#
# BUILD_DIR (default build/) must be configured (CMake writes its compile_commands.json). The units
# are those that build compiles: a CPU build leaves out the CUDA-only ones (a GPU build's tree
# checks them too), each as it is written: without LibTorch's precompiled header (WORKLOAD_PCH).
# JOBS (default: the cores) units run at once. The reference is clang-tidy 14,
# Debian 12's and CI's; with --if-available (scripts/test.sh) a machine without it, or with another
# version, skips the check with a note.
#
# A unit costs about 20 s (LibTorch's headers), the tree about 20 minutes of one core. --record
# FILE skips the units FILE records as clean with the very same inputs: the tool, .clang-tidy, the
# compile command and every file the compiler read for the unit, from the built tree's dependency
# lists (scripts/dev/tidy_record.py; an unbuilt unit, or any without Ninja's lists, is checked).
# --update-record rewrites FILE with every unit's key once all are clean: run it after a change,
# and commit FILE with it, so that scripts/test.sh re-checks only what the next change touches.
set -euo pipefail
# shellcheck source=scripts/dev/checks.sh
source "$(dirname "$0")/checks.sh"
args=()
build_dir=build
record=
update_record=0
while [ $# -gt 0 ]; do
  case $1 in
    --record)
      [ $# -ge 2 ] || { echo "check_tidy.sh: error: --record needs a FILE" >&2; exit 2; }
      record=$2
      shift
      ;;
    --update-record) update_record=1 ;;
    --*) args+=("$1") ;;
    *) build_dir=$1 ;;
  esac
  shift
done
if [ "$update_record" = 1 ] && [ -z "$record" ]; then
  echo "check_tidy.sh: error: --update-record needs --record FILE" >&2
  exit 2
fi
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
all_units=("${units[@]}")
keys=$(mktemp)
out=$(mktemp)
plain_db=$(mktemp -d)
trap 'rm -rf "$out" "$keys" "$plain_db"' EXIT
# The units as they are written: without LibTorch's precompiled header (WORKLOAD_PCH), which a unit
# could otherwise lean on for an include it lacks.
python3 scripts/dev/tidy_record.py --plain-db "$build_dir" "$plain_db"
recorded=0
if [ -n "$record" ]; then
  python3 scripts/dev/tidy_record.py "$build_dir" "${units[@]}" >"$keys"
  if [ -f "$record" ]; then
    mapfile -t units < <(grep -vxFf <(grep -v '^#' "$record") "$keys" | cut -d' ' -f2-)
    recorded=$((${#all_units[@]} - ${#units[@]}))
  fi
fi
rc=0
if [ ${#units[@]} -gt 0 ]; then
  printf '%s\n' "${units[@]}" |
    xargs -P "${JOBS:-$(nproc)}" -n 1 clang-tidy -p "$plain_db" --quiet 2>/dev/null >"$out" || rc=$?
fi
mapfile -t findings < <(grep -E '^[^ ].*:[0-9]+:[0-9]+: (warning|error): ' "$out" |
  sed "s|^$root/||" | sort -u)
if [ ${#findings[@]} -gt 0 ]; then
  printf '%s\n' "${findings[@]}"
  echo "check_tidy.sh: ${#findings[@]} finding(s) in the ${#units[@]} units of $build_dir checked" >&2
  exit 1
fi
if [ "$rc" != 0 ]; then
  echo "check_tidy.sh: error: clang-tidy failed (xargs status $rc) without a finding" >&2
  exit 1
fi
if [ "$update_record" = 1 ]; then
  {
    echo "# clang-tidy's clean units: KEY UNIT (scripts/dev/check_tidy.sh --record, --update-record)"
    grep -v '^- ' "$keys"
  } >"$record"
  echo "check_tidy.sh: $record: $(grep -vc '^#' "$record") clean units recorded"
fi
echo "check_tidy.sh: ${#all_units[@]} units pass clang-tidy (${#units[@]} checked, $recorded unchanged since the record)"
