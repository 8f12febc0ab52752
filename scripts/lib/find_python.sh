# shellcheck shell=bash
# Sourced by the shell scripts that run Python: find_python MODULE prints the first interpreter
# that can import MODULE among $PYTHON, python3 and /usr/bin/python3 (on Debian the pyenv python3
# first on PATH may lack the system's python3-matplotlib), or returns 1.
find_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3 /usr/bin/python3; do
    [[ -n $candidate ]] || continue
    command -v "$candidate" >/dev/null 2>&1 || continue
    if "$candidate" -c "import $1" >/dev/null 2>&1; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}
