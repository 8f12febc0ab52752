#!/usr/bin/env bash
# Run the Python tests of scripts/ (tests/scripts, laid out as scripts/ is) with an interpreter that has
# matplotlib, installing Debian's python3-matplotlib (and python3-pytest) first when no interpreter has
# it. CTest runs this from the repository root.
#
# usage: scripts/dev/python_tests.sh [--no-install] [--only PATH] [PYTEST OR UNITTEST ARGS...]
#
# --only PATH: only the tests of PATH, a test file or folder under tests/scripts (CTest runs each
# of them as a suite of its own, python_<name>, so that two of them can run at once).
#
# Interpreter: $PYTHON, then python3, then /usr/bin/python3, the first that imports matplotlib. Runs
# pytest when that interpreter has it, else unittest discovery. Both import the tests as the package
# `scripts` under tests/ (tests/scripts/__init__.py; its sub-folders are packages too, which discovery
# needs to descend into them), so that tests/scripts/nsys_analysis/ never shadows scripts/nsys_analysis/.
# Exit status: the tests' (pytest's or unittest's: 0 all passed, else nonzero); 1 when no interpreter
# with matplotlib is available and none could be installed.
set -uo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=scripts/lib/find_python.sh
source "$repo_root/scripts/lib/find_python.sh"
cd "$repo_root" || exit 1

install=1
if [[ ${1:-} == --no-install ]]; then
  install=0
  shift
fi
only=tests/scripts
if [[ ${1:-} == --only ]]; then
  only=${2:-}
  shift 2 || { echo "python_tests.sh: --only needs a path" >&2; exit 2; }
  if [[ $only != tests/scripts/* || ! -e $only ]]; then
    echo "python_tests.sh: --only: expected a test file or folder under tests/scripts, got '$only'" >&2
    exit 2
  fi
fi

if ! py=$(find_python matplotlib); then
  if ((install)) && command -v apt-get >/dev/null 2>&1 && [[ $(id -u) == 0 ]]; then
    echo "python_tests.sh: installing python3-matplotlib python3-pytest with apt-get" >&2
    packages=(python3-matplotlib python3-numpy python3-pytest)
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${packages[@]}" >&2 ||
      { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${packages[@]}" >&2; }
  fi
  py=$(find_python matplotlib) || {
    echo "python_tests.sh: error: no Python with matplotlib (tried \$PYTHON, python3, /usr/bin/python3); install python3-matplotlib" >&2
    exit 1
  }
fi

echo "python_tests.sh: $py ($("$py" -c 'import sys; print(sys.version.split()[0])'))" >&2
if "$py" -c "import pytest" >/dev/null 2>&1; then
  exec "$py" -m pytest -q -p no:cacheprovider "$only" "$@"
fi
if [[ -f $only ]]; then
  exec "$py" -m unittest discover -s "$(dirname "$only")" -t tests -p "$(basename "$only")" "$@"
fi
exec "$py" -m unittest discover -s "$only" -t tests "$@"
