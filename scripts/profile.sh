#!/usr/bin/env bash
# Capture train_resnet50 (or any command) under the article's Nsight Systems options, run it again without
# nsys (the untraced run), then export the capture to SQLite and the four nsys stats CSV summaries.
#
# usage: scripts/profile.sh --prefix PREFIX [--binary PATH] [--nproc N] [--repeat N] [--no-untraced]
#                           [--lean] [--nsys-opt OPT]... [--analyze] [--dry-run]
#                           [PROGRAM ARGS...] [-- PROGRAM ARGS... | -- COMMAND [ARGS...]]
#
# `scripts/profile.sh --help` prints the whole documentation: every flag, the outputs (PREFIX.nsys-rep,
# .sqlite, .json, .log, the untraced run's, per rank with --nproc, per capture with --repeat), the checks
# made before anything runs, and the exit statuses. Its text is HELP in
# scripts/nsys_analysis/profile/cli.py.
#
# This script is a thin wrapper: the work is done by the Python package scripts/nsys_analysis/profile/
# (main.run()), with every argument passed on as given. The interpreter is found as the other scripts
# find one (scripts/lib/find_python.sh: $PYTHON, python3, /usr/bin/python3); without one, exit 2.
set -uo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib/find_python.sh
source "$script_dir/lib/find_python.sh"

if ! py=$(find_python json); then
  echo "profile.sh: error: no Python 3 to run profile.sh (tried \$PYTHON, python3, /usr/bin/python3); install python3" >&2
  exit 2
fi
# scripts/ first on the module path (not through PYTHONPATH, which the profiled program would inherit).
# exec: profile.sh's pid is the interpreter's, so that a signal sent to it alone is handled there
# (SIGINT and SIGTERM passed on to the command running, waited for, then 130 or 143).
exec "$py" -c 'import sys; sys.path.insert(0, sys.argv.pop(1)); from nsys_analysis.profile.main import run; run()' \
  "$script_dir" "$@"
