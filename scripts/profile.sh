#!/usr/bin/env bash
# Capture train_resnet50 (or any command) under the article's Nsight Systems options, then export the
# capture to SQLite and the four nsys stats CSV summaries.
#
# usage: scripts/profile.sh --prefix PREFIX [--binary PATH] [--nproc N] [--analyze] [--dry-run]
#                           [PROGRAM ARGS...] [-- PROGRAM ARGS... | -- COMMAND [ARGS...]]
#
#   --prefix PREFIX  names every output: PREFIX.nsys-rep, PREFIX.sqlite, PREFIX_<report>.csv,
#                    PREFIX.json (run report), PREFIX.log (program and nsys output)
#   --binary PATH    the training binary (default: $TRAIN_BIN, else build/bin/train_resnet50)
#   --nproc N        N data-parallel ranks on this machine, one nsys per rank:
#                      torchrun --standalone --nproc-per-node N --no-python nsys profile ...
#                        --output=PREFIX.rank%q{RANK} PROGRAM ARGS... --report PREFIX.json
#                    (scripts/launch_local.sh N -- nsys profile ... when torchrun is not on PATH, or
#                    with PROFILE_LAUNCHER=local; PROFILE_LAUNCHER=torchrun insists on torchrun).
#                    Outputs are per rank, PREFIX.rank<r> in place of PREFIX (train_resnet50 writes
#                    PREFIX.rank<r>.json itself), except the one PREFIX.log of all ranks
#   --analyze        also run scripts/analyze.py on the export (into PREFIX_analysis/); with --nproc,
#                    each rank into PREFIX.rank<r>_analysis/ and the ranks compared in
#                    PREFIX_ranks_analysis/ (ranks.md)
#   --dry-run        print the commands, run nothing (but train_resnet50 --print-config, see below)
#
# Arguments other than these, and arguments after `--` that start with `-`, go to the training binary.
# Before anything runs (--dry-run included), the binary is asked for the run's configuration with those
# arguments plus --print-config: flags it refuses stop here (exit 2, its message passed on). When the
# configuration has cuda_graph, nsys also gets --cuda-graph-trace=node: each replay's kernels, copies and
# memsets as their own records (by default nsys records a replay as one graph range, not its kernels).
# After `--`, a first word that is not a flag starts a different command to wrap instead, e.g.
#   scripts/profile.sh --prefix out/py_reuse8 -- python3 peer/seed_workload.py ROOT --steps 8
# train_resnet50 gets `--report PREFIX.json` unless its configuration has a report (then that report is
# copied to PREFIX.json; with --nproc each rank's, REPORT with .rank<r> before its extension, to
# PREFIX.rank<r>.json);
# for other commands the last stdout line that is a JSON object becomes PREFIX.json (not with --nproc:
# the ranks' output is interleaved in PREFIX.log).
#
# The binary is checked first, --dry-run included: a path must be an executable file, a bare name a
# program on PATH. Before a capture, every output (PREFIX.nsys-rep, .sqlite, .json, .log, the CSVs; per
# rank with --nproc) is checked: a directory, FIFO or socket there stops the run (symlinks are followed,
# /dev/null is fine). Stale outputs of an earlier run are removed first (a symlink's target, the link kept;
# never a device or FIFO); PREFIX.json is written atomically (scripts/output_files.sh).
#
# Exit status: the program's when it fails (with --nproc, the launcher's); 2 usage errors, nsys, the
# launcher, the binary (missing, a directory, not executable) or a Python to read its configuration
# missing, flags the binary refuses, an output path that cannot be written; 1 no capture (.nsys-rep, of
# any rank) produced, export / stats / analyze.py failed, or PREFIX.json could not be written.
set -uo pipefail

# shellcheck disable=SC2054  # the commas belong to --trace's value
readonly NSYS_PROFILE_OPTS=(--trace=cuda,nvtx,osrt --sample=none --cpuctxsw=none
  --capture-range=cudaProfilerApi --capture-range-end=stop)
readonly STATS_REPORTS=nvtx_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_api_sum

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(dirname "$script_dir")
# shellcheck source=scripts/find_python.sh
source "$script_dir/find_python.sh"
# shellcheck source=scripts/output_files.sh
source "$script_dir/output_files.sh"

# run_profiled WHERE CMD...: runs the capture with its output in $prefix.log as well; exits with the
# program's status when it failed (WHERE adds "from <launcher>" to the message).
run_profiled() {
  local where=$1 status
  shift
  echo "profile.sh: $(show_cmd "$@")" >&2
  "$@" 2>&1 | tee "$prefix.log"
  status=${PIPESTATUS[0]}
  if ((status != 0)); then
    echo "profile.sh: error: the profiled program failed (exit $status${where:+ $where}); output in $prefix.log" >&2
    exit "$status"
  fi
}

usage() { awk 'NR > 3 && !/^#/ { exit } NR > 3 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }
die() { echo "profile.sh: error: $1" >&2; exit "${2:-1}"; }
usage_error() { echo "profile.sh: error: $1" >&2; echo "run scripts/profile.sh --help for usage" >&2; exit 2; }

# show_cmd ARGS...: the command as one shell-pasteable line (words quoted only where needed).
show_cmd() {
  local word out=()
  for word in "$@"; do
    # {NAME} (nsys's %q{RANK}) needs no quoting: braces expand only around a comma or `..`.
    if [[ $word =~ ^([A-Za-z0-9_./=,:@%+-]|\{[A-Za-z0-9_]*\})+$ ]]; then out+=("$word"); else out+=("$(printf '%q' "$word")"); fi
  done
  echo "${out[*]}"
}


prefix=""
binary="${TRAIN_BIN:-}"
binary_flag=0
analyze=0
dry_run=0
nproc=""
nproc_given=0
prog_args=()
command=()
while (($#)); do
  case "$1" in
    --prefix) (($# >= 2)) || usage_error "expected a value after --prefix"; prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --binary) (($# >= 2)) || usage_error "expected a value after --binary"; binary=$2; binary_flag=1; shift 2 ;;
    --binary=*) binary=${1#*=}; binary_flag=1; shift ;;
    --nproc) (($# >= 2)) || usage_error "expected a value after --nproc"; nproc=$2; nproc_given=1; shift 2 ;;
    --nproc=*) nproc=${1#*=}; nproc_given=1; shift ;;
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
if ((nproc_given)); then
  if ! [[ $nproc =~ ^[0-9]{1,6}$ ]] || ((10#$nproc < 1)); then
    usage_error "expected --nproc to be a positive integer (ranks on this machine), got '$nproc'"
  fi
  nproc=$((10#$nproc))
fi
if ((${#command[@]})); then
  ((${#prog_args[@]} == 0)) || usage_error "arguments before -- (${prog_args[*]}) apply only to the training binary, got a command after --: ${command[*]}"
  ((binary_flag == 0)) || usage_error "--binary conflicts with the command after --: ${command[*]}"
else
  if ((binary_flag)); then
    binary_source=--binary
  elif [[ -n $binary ]]; then
    binary_source=TRAIN_BIN
  else
    binary_source="the default binary"
    binary="$repo_root/build/bin/train_resnet50"
  fi
  command=("$binary" "${prog_args[@]}")
fi

# check_binary: the training binary can run (a path: an executable file; a bare name: a program on PATH),
# else exit 2 naming where it came from ($binary_source). Dry runs too: a command that cannot run is no plan.
check_binary() {
  if [[ $binary == */* ]]; then
    if [[ -d $binary ]]; then
      die "$binary_source $binary: is a directory, expected the train_resnet50 executable" 2
    elif [[ ! -e $binary ]]; then
      die "$binary_source $binary: no such file: expected an executable train_resnet50 at $binary (build it, or pass --binary PATH / TRAIN_BIN)" 2
    elif [[ ! -f $binary || ! -x $binary ]]; then
      die "$binary_source $binary: is not an executable file" 2
    fi
  else
    type -P -- "$binary" >/dev/null ||
      die "$binary_source $binary: expected $binary on PATH, found none (pass --binary PATH / TRAIN_BIN)" 2
  fi
}
[[ -z ${binary_source:-} ]] || check_binary

# check_outputs ANALYSIS_DIR PFX...: each capture PFX's files, the one PREFIX.log and (--analyze) the
# analysis directory can be written, else exit 2 naming --prefix and the path, before anything runs.
check_outputs() {
  local analysis_dir=$1 pfx rep path why files=("$prefix.log")
  shift
  for pfx in "$@"; do
    files+=("$pfx.nsys-rep" "$pfx.sqlite" "$pfx.json")
    for rep in ${STATS_REPORTS//,/ }; do files+=("${pfx}_$rep.csv"); done
    ((analyze)) && [[ -e ${pfx}_analysis && ! -d ${pfx}_analysis ]] &&
      die "--prefix $prefix: ${pfx}_analysis: is not a directory (--analyze writes there)" 2
  done
  for path in "${files[@]}"; do
    why=$(output_problem "$path") || die "--prefix $prefix: $path: $why" 2
  done
  ((analyze)) && [[ -e $analysis_dir && ! -d $analysis_dir ]] &&
    die "--prefix $prefix: $analysis_dir: is not a directory (--analyze writes there)" 2
  return 0
}

# read_train_config: the run's resolved configuration, asked of train_resnet50 itself (`--print-config`:
# its flags parsed and validated as a run would, then the report's `config` object on stdout), so that
# this script never re-parses the flag table. Sets cuda_graph (0 or 1) and given_report; exits 2 when
# the binary is missing, refuses the flags (its message passes through) or answers something else.
read_train_config() {
  local exe=${command[0]} config py status=0 fields=()
  if [[ $exe == */* ]]; then
    [[ -f $exe && -x $exe ]] ||
      die "expected an executable train_resnet50 at $exe, found none (build it, or pass --binary PATH / TRAIN_BIN)" 2
  else
    command -v -- "$exe" >/dev/null 2>&1 || die "expected $exe on PATH, found none (pass --binary PATH / TRAIN_BIN)" 2
  fi
  py=$(find_python json) ||
    die "no Python to read $exe --print-config's JSON (tried \$PYTHON, python3, /usr/bin/python3); install python3" 2
  config=$("${command[@]}" --print-config) || status=$?
  if ((status != 0)); then
    die "$(show_cmd "${command[@]}" --print-config) failed (exit $status): the training flags are refused (its message above), or the binary predates --print-config" 2
  fi
  # Two NUL-terminated fields: cuda_graph (1 or 0) and the --report path ("" when none), or "!" and why not.
  mapfile -d '' -t fields < <("$py" -c '
import json, sys
try:
    c = json.loads(sys.stdin.read())
    why = None if isinstance(c, dict) else "not an object"
except ValueError as e:
    c, why = None, "not JSON (%s)" % e
if why is None and not (isinstance(c.get("cuda_graph"), bool) and isinstance(c.get("report"), str)):
    why = "no boolean cuda_graph and string report"
sys.stdout.write("%s\0%s\0" % (("!", why) if why else (int(c["cuda_graph"]), c["report"])))
' <<<"$config")
  if ((${#fields[@]} != 2)) || [[ ${fields[0]} == '!' ]]; then
    die "expected $(show_cmd "${command[@]}" --print-config) to print the run's configuration as one JSON object, got ${fields[1]:-nothing readable}: ${config:0:200}" 2
  fi
  cuda_graph=${fields[0]}
  given_report=${fields[1]}
}

report="$prefix.json"
is_train=0
[[ $(basename -- "${command[0]}") == train_resnet50* ]] && is_train=1
given_report=""
nsys_opts=("${NSYS_PROFILE_OPTS[@]}")
if ((is_train)); then
  read_train_config
  ((cuda_graph)) && nsys_opts+=(--cuda-graph-trace=node)
  [[ -n $given_report ]] || command+=(--report "$report")
fi

# set_export_cmd PFX, set_stats_cmd PFX: export_cmd and stats_cmd for the capture PFX.nsys-rep.
set_export_cmd() { export_cmd=(nsys export --type=sqlite --force-overwrite=true "--output=$1.sqlite" "$1.nsys-rep"); }
set_stats_cmd() {
  stats_cmd=(nsys stats "--report=$STATS_REPORTS" --format=csv --force-overwrite=true "--output=$1" "$1.sqlite")
}

profile_cmd=(nsys profile "${nsys_opts[@]}" --force-overwrite=true "--output=$prefix" "${command[@]}")
set_export_cmd "$prefix"
set_stats_cmd "$prefix"

# rank_path PATH R: PATH with .rank<R> before its extension, as train_resnet50 names each rank's report
# (lib/dist/dist_env.cpp, rank_report_path: out/run.json -> out/run.rank0.json, out/run -> out/run.rank0).
rank_path() {
  local dir="" base=$1 stem
  if [[ $1 == */* ]]; then dir=${1%/*}/; base=${1##*/}; fi
  stem=${base%.*}
  if [[ $base == *.* && -n $stem ]]; then echo "$dir$stem.rank$2.${base##*.}"; else echo "$1.rank$2"; fi
}

# profile_ranks: --nproc N. One nsys per rank (a single nsys around the launcher would record every rank
# in one report, where how the ranks' cudaProfilerStart/Stop calls combine is undocumented), each
# naming its report after RANK from its environment; then export, stats and analysis per rank, and the
# ranks compared. Uses the globals set above; exits like the single-process path.
profile_ranks() {
  local n=$nproc r rp src rep launcher=${PROFILE_LAUNCHER:-auto} launch_cmd missing=() sqlites=() reports=() outs=()
  local nsys_cmd=(nsys profile "${nsys_opts[@]}" --force-overwrite=true "--output=$prefix.rank%q{RANK}"
                  "${command[@]}")
  case $launcher in
    auto) if command -v torchrun >/dev/null 2>&1; then launcher=torchrun; else launcher=local; fi ;;
    torchrun | local) ;;
    *) usage_error "expected PROFILE_LAUNCHER to be torchrun, local or auto, got '$launcher'" ;;
  esac
  if [[ $launcher == torchrun ]]; then
    launch_cmd=(torchrun --standalone --nproc-per-node "$n" --no-python "${nsys_cmd[@]}")
  else
    launch_cmd=("$script_dir/launch_local.sh" "$n" -- "${nsys_cmd[@]}")
  fi
  if ((dry_run)); then
    show_cmd "${launch_cmd[@]}"
    for ((r = 0; r < n; r++)); do
      set_export_cmd "$prefix.rank$r"
      show_cmd "${export_cmd[@]}"
      set_stats_cmd "$prefix.rank$r"
      show_cmd "${stats_cmd[@]}"
    done
    exit 0
  fi

  command -v nsys >/dev/null 2>&1 ||
    die "nsys (Nsight Systems CLI) is not on PATH; install Nsight Systems or add its bin/ directory to PATH" 2
  if [[ $launcher == torchrun ]]; then
    command -v torchrun >/dev/null 2>&1 ||
      die "torchrun is not on PATH (PROFILE_LAUNCHER=torchrun); unset PROFILE_LAUNCHER to use scripts/launch_local.sh" 2
  fi

  local pfxs=()
  for ((r = 0; r < n; r++)); do pfxs+=("$prefix.rank$r"); done
  check_outputs "${prefix}_ranks_analysis" "${pfxs[@]}"
  mkdir -p -- "$(dirname -- "$prefix")" || die "cannot create the directory of $prefix" 1
  # Stale outputs would hide a rank whose capture never started. (PREFIX.log is truncated by tee.)
  for ((r = 0; r < n; r++)); do
    remove_stale "$prefix.rank$r.nsys-rep" "$prefix.rank$r.sqlite"
    ((is_train)) && [[ -z $given_report ]] && remove_stale "$prefix.rank$r.json"
  done

  run_profiled "from $launcher" "${launch_cmd[@]}"
  for ((r = 0; r < n; r++)); do
    [[ -f $prefix.rank$r.nsys-rep ]] || missing+=("$prefix.rank$r.nsys-rep")
  done
  ((${#missing[@]} == 0)) ||
    die "nsys produced no ${missing[*]}: the capture range never started on those ranks (the program must call cudaProfilerStart; check $prefix.log)" 1

  if ((!is_train)); then
    echo "profile.sh: warning: no run reports for a wrapped command under --nproc (its ranks' output is interleaved in $prefix.log)" >&2
  fi
  for ((r = 0; r < n; r++)); do
    rp="$prefix.rank$r.json"
    if [[ -n $given_report ]]; then
      src=$(rank_path "$given_report" "$r")
      if [[ -f $src ]]; then
        [[ $src -ef $rp ]] || write_file "$rp" <"$src" || die "cannot copy $src to $rp" 1
      else
        echo "profile.sh: warning: rank $r wrote no report at $src" >&2
      fi
    fi
    ((is_train)) && [[ ! -f $rp ]] && echo "profile.sh: warning: no run report at $rp" >&2
    [[ -f $rp ]] && reports+=(--report "$rp")
    sqlites+=("$prefix.rank$r.sqlite")
    outs+=(--rank-out "$prefix.rank${r}_analysis")
  done

  for ((r = 0; r < n; r++)); do
    set_export_cmd "$prefix.rank$r"
    echo "profile.sh: $(show_cmd "${export_cmd[@]}")" >&2
    "${export_cmd[@]}" || die "nsys export failed for rank $r (exit $?)" 1
    set_stats_cmd "$prefix.rank$r"
    echo "profile.sh: $(show_cmd "${stats_cmd[@]}")" >&2
    "${stats_cmd[@]}" || die "nsys stats failed for rank $r (exit $?)" 1
  done

  if ((analyze)); then
    py=$(find_python matplotlib) ||
      die "no Python with matplotlib for analyze.py (tried \$PYTHON, python3, /usr/bin/python3); install python3-matplotlib" 1
    if ((${#reports[@]} != 2 * n)); then
      ((${#reports[@]} == 0)) || echo "profile.sh: warning: not every rank has a run report; analyzing without reports" >&2
      reports=()
    fi
    "$py" "$script_dir/analyze.py" "${sqlites[@]}" "${reports[@]}" "${outs[@]}" --out "${prefix}_ranks_analysis" ||
      die "analyze.py failed (exit $?)" 1
  fi

  echo
  for ((r = 0; r < n; r++)); do
    rp="$prefix.rank$r"
    echo "rank $r:"
    echo "capture:     $rp.nsys-rep"
    echo "sqlite:      $rp.sqlite"
    for rep in ${STATS_REPORTS//,/ }; do
      printf '%-12s %s\n' "$rep:" "${rp}_$rep.csv"
    done
    if [[ -f $rp.json ]]; then echo "run report:  $rp.json"; fi
    if ((analyze)); then echo "analysis:    ${rp}_analysis/summary.md"; fi
  done
  echo "log:         $prefix.log"
  if ((analyze)); then echo "ranks:       ${prefix}_ranks_analysis/ranks.md"; fi
  exit 0
}
((nproc_given == 0)) || profile_ranks

if ((dry_run)); then
  show_cmd "${profile_cmd[@]}"
  show_cmd "${export_cmd[@]}"
  show_cmd "${stats_cmd[@]}"
  exit 0
fi

command -v nsys >/dev/null 2>&1 ||
  die "nsys (Nsight Systems CLI) is not on PATH; install Nsight Systems or add its bin/ directory to PATH" 2

check_outputs "${prefix}_analysis" "$prefix"
mkdir -p -- "$(dirname -- "$prefix")" || die "cannot create the directory of $prefix" 1
# Stale outputs would hide a capture that never started. (PREFIX.log is truncated by tee.)
remove_stale "$prefix.nsys-rep" "$prefix.sqlite"
((is_train)) && [[ -z $given_report ]] && remove_stale "$report"

run_profiled "" "${profile_cmd[@]}"
[[ -f $prefix.nsys-rep ]] ||
  die "nsys produced no $prefix.nsys-rep: the capture range never started (the program must call cudaProfilerStart; check $prefix.log)" 1

if [[ -n $given_report ]]; then
  if [[ -f $given_report ]]; then
    [[ $given_report -ef $report ]] || write_file "$report" <"$given_report" || die "cannot copy $given_report to $report" 1
  else
    echo "profile.sh: warning: the program wrote no report at $given_report" >&2
  fi
elif ((!is_train)); then
  # A wrapped command (the Python reference) prints its report as one JSON line.
  line=$(grep -E '^[[:space:]]*\{.*\}[[:space:]]*$' "$prefix.log" | tail -n 1)
  if [[ -n $line ]]; then
    printf '%s\n' "$line" | write_file "$report" || die "cannot write the run report $report" 1
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
