#!/usr/bin/env bash
# Checks every Python file of the tree: black's format, flake8's findings, and mypy's types over
# scripts/ (the analysis package and the scripts beside it; every function body, annotated or not).
# Line length 100, like the C++; the settings are in pyproject.toml and .flake8.
#
#   scripts/dev/check_python.sh [--fix] [--if-available]
#
# --fix lets black format the files in place (flake8's and mypy's findings are fixed by hand). The
# references are Debian 12's and CI's releases (black 23, flake8 5, mypy 1); with --if-available
# (scripts/test.sh) a machine without one, or with another version, skips the check with a note.
set -euo pipefail
# shellcheck source=scripts/dev/checks.sh
source "$(dirname "$0")/checks.sh"
check_init check_python.sh "$@"
check_tool black 23 black
check_tool flake8 5 flake8
check_tool mypy 1 mypy
mapfile -t files < <(tracked_files '*.py')
if [ "$CHECK_FIX" = 1 ]; then
  black -q "${files[@]}"
  exit 0
fi
failed=()
black -q --check "${files[@]}" || failed+=("black (scripts/dev/check_python.sh --fix formats)")
flake8 "${files[@]}" || failed+=(flake8)
mapfile -t typed < <(tracked_files 'scripts/*.py')
mypy --no-error-summary "${typed[@]}" || failed+=(mypy)
if [ ${#failed[@]} -gt 0 ]; then
  printf 'check_python.sh: %s found the above\n' "${failed[@]}" >&2
  exit 1
fi
echo "check_python.sh: ${#files[@]} Python files pass black, flake8 and mypy"
