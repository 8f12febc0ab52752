#!/usr/bin/env bash
# Capture train_resnet50 (or any command) under the article's Nsight Systems options, then export the
# capture to SQLite and the four nsys stats CSV summaries.
#
# usage: scripts/profile.sh --prefix PREFIX [--binary PATH] [--analyze] [--dry-run] [PROGRAM ARGS...]
#                           [-- PROGRAM ARGS... | -- COMMAND [ARGS...]]
#
#   --prefix PREFIX  names every output: PREFIX.nsys-rep, PREFIX.sqlite, PREFIX_<report>.csv,
#                    PREFIX.json (run report), PREFIX.log (program and nsys output)
#   --binary PATH    the training binary (default: $TRAIN_BIN, else build/bin/train_resnet50)
#   --analyze        also run scripts/analyze.py on the export (into PREFIX_analysis/)
#   --dry-run        print the commands, run nothing
#
# Arguments other than these, and arguments after `--` that start with `-`, go to the training binary.
# After `--`, a first word that is not a flag starts a different command to wrap instead, e.g.
#   scripts/profile.sh --prefix out/py_reuse8 -- python3 peer/seed_workload.py ROOT --steps 8
# train_resnet50 gets `--report PREFIX.json` unless it was given --report (then that report is copied to
# PREFIX.json); for other commands the last stdout line that is a JSON object becomes PREFIX.json.
#
# Exit status: the program's when it fails; 2 usage errors, nsys or the binary missing; 1 no capture
# (.nsys-rep) produced, or export / stats failed.
set -uo pipefail

# shellcheck disable=SC2054  # the commas belong to --trace's value
readonly NSYS_PROFILE_OPTS=(--trace=cuda,nvtx,osrt --sample=none --cpuctxsw=none
  --capture-range=cudaProfilerApi --capture-range-end=stop)
readonly STATS_REPORTS=nvtx_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_api_sum

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(dirname "$script_dir")
# shellcheck source=scripts/find_python.sh
source "$script_dir/find_python.sh"

usage() { awk 'NR > 3 && !/^#/ { exit } NR > 3 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }
die() { echo "profile.sh: error: $1" >&2; exit "${2:-1}"; }
usage_error() { echo "profile.sh: error: $1" >&2; echo "run scripts/profile.sh --help for usage" >&2; exit 2; }

# show_cmd ARGS...: the command as one shell-pasteable line (words quoted only where needed).
show_cmd() {
  local word out=()
  for word in "$@"; do
    if [[ $word =~ ^[A-Za-z0-9_./=,:@%+-]+$ ]]; then out+=("$word"); else out+=("$(printf '%q' "$word")"); fi
  done
  echo "${out[*]}"
}


prefix=""
binary="${TRAIN_BIN:-}"
binary_flag=0
analyze=0
dry_run=0
prog_args=()
command=()
while (($#)); do
  case "$1" in
    --prefix) (($# >= 2)) || usage_error "expected a value after --prefix"; prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --binary) (($# >= 2)) || usage_error "expected a value after --binary"; binary=$2; binary_flag=1; shift 2 ;;
    --binary=*) binary=${1#*=}; binary_flag=1; shift ;;
    --analyze) analyze=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) prog_args+=("$1"); shift ;;
  esac
done
if (($#)); then
  if [[ $1 == -* ]]; then
    prog_args+=("$@")
  else
    command=("$@")
  fi
fi

[[ -n $prefix ]] || usage_error "expected --prefix PREFIX (outputs are named PREFIX.nsys-rep, PREFIX.sqlite, ...)"
[[ $prefix != */ ]] || usage_error "expected --prefix to name a file prefix, got directory '$prefix'"
if ((${#command[@]})); then
  ((${#prog_args[@]} == 0)) || usage_error "arguments before -- (${prog_args[*]}) apply only to the training binary, got a command after --: ${command[*]}"
  ((binary_flag == 0)) || usage_error "--binary conflicts with the command after --: ${command[*]}"
else
  [[ -n $binary ]] || binary="$repo_root/build/bin/train_resnet50"
  command=("$binary" "${prog_args[@]}")
fi

report="$prefix.json"
is_train=0
[[ $(basename -- "${command[0]}") == train_resnet50* ]] && is_train=1
given_report=""
if ((is_train)); then
  for ((i = 1; i < ${#command[@]}; i++)); do
    case "${command[i]}" in
      --report) given_report=${command[i + 1]:-} ;;
      --report=*) given_report=${command[i]#*=} ;;
    esac
  done
  [[ -n $given_report ]] || command+=(--report "$report")
fi

profile_cmd=(nsys profile "${NSYS_PROFILE_OPTS[@]}" --force-overwrite=true "--output=$prefix" "${command[@]}")
export_cmd=(nsys export --type=sqlite --force-overwrite=true "--output=$prefix.sqlite" "$prefix.nsys-rep")
stats_cmd=(nsys stats "--report=$STATS_REPORTS" --format=csv --force-overwrite=true "--output=$prefix" "$prefix.sqlite")

if ((dry_run)); then
  show_cmd "${profile_cmd[@]}"
  show_cmd "${export_cmd[@]}"
  show_cmd "${stats_cmd[@]}"
  exit 0
fi

command -v nsys >/dev/null 2>&1 ||
  die "nsys (Nsight Systems CLI) is not on PATH; install Nsight Systems or add its bin/ directory to PATH" 2
if ((is_train)) && [[ ${command[0]} == */* ]] && [[ ! -x ${command[0]} ]]; then
  die "expected an executable train_resnet50 at ${command[0]}, found none (build it, or pass --binary PATH / TRAIN_BIN)" 2
fi

mkdir -p -- "$(dirname -- "$prefix")" || die "cannot create the directory of $prefix" 1
# Stale outputs would hide a capture that never started.
rm -f -- "$prefix.nsys-rep" "$prefix.sqlite" "$prefix.log"
((is_train)) && [[ -z $given_report ]] && rm -f -- "$report"

echo "profile.sh: $(show_cmd "${profile_cmd[@]}")" >&2
"${profile_cmd[@]}" 2>&1 | tee "$prefix.log"
status=${PIPESTATUS[0]}
if ((status != 0)); then
  echo "profile.sh: error: the profiled program failed (exit $status); output in $prefix.log" >&2
  exit "$status"
fi
[[ -f $prefix.nsys-rep ]] ||
  die "nsys produced no $prefix.nsys-rep: the capture range never started (the program must call cudaProfilerStart; check $prefix.log)" 1

if [[ -n $given_report ]]; then
  if [[ -f $given_report ]]; then
    [[ $given_report -ef $report ]] || cp -- "$given_report" "$report"
  else
    echo "profile.sh: warning: the program wrote no report at $given_report" >&2
  fi
elif ((!is_train)); then
  # A wrapped command (the Python reference) prints its report as one JSON line.
  line=$(grep -E '^[[:space:]]*\{.*\}[[:space:]]*$' "$prefix.log" | tail -n 1)
  if [[ -n $line ]]; then
    printf '%s\n' "$line" >"$report"
  else
    echo "profile.sh: warning: no JSON report line in the program's output; no $report" >&2
  fi
fi
[[ -f $report ]] || echo "profile.sh: warning: no run report at $report" >&2

echo "profile.sh: $(show_cmd "${export_cmd[@]}")" >&2
"${export_cmd[@]}" || die "nsys export failed (exit $?)" 1
echo "profile.sh: $(show_cmd "${stats_cmd[@]}")" >&2
"${stats_cmd[@]}" || die "nsys stats failed (exit $?)" 1

analysis_dir="${prefix}_analysis"
if ((analyze)); then
  py=$(find_python matplotlib) ||
    die "no Python with matplotlib for analyze.py (tried \$PYTHON, python3, /usr/bin/python3); install python3-matplotlib" 1
  report_args=()
  [[ -f $report ]] && report_args=(--report "$report")
  "$py" "$script_dir/analyze.py" "$prefix.sqlite" "${report_args[@]}" --out "$analysis_dir" ||
    die "analyze.py failed (exit $?)" 1
fi

echo
echo "capture:     $prefix.nsys-rep"
echo "sqlite:      $prefix.sqlite"
for r in ${STATS_REPORTS//,/ }; do
  printf '%-12s %s\n' "$r:" "${prefix}_$r.csv"
done
if [[ -f $report ]]; then echo "run report:  $report"; fi
echo "log:         $prefix.log"
if ((analyze)); then echo "analysis:    $analysis_dir/summary.md"; fi
exit 0
