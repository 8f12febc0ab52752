#!/usr/bin/env bash
# Capture train_resnet50 (or any command) under the article's Nsight Systems options, run it again without
# nsys (the untraced run), then export the capture to SQLite and the four nsys stats CSV summaries.
#
# usage: scripts/profile.sh --prefix PREFIX [--binary PATH] [--nproc N] [--repeat N] [--no-untraced]
#                           [--analyze] [--dry-run]
#                           [PROGRAM ARGS...] [-- PROGRAM ARGS... | -- COMMAND [ARGS...]]
#
#   --prefix PREFIX  names every output: PREFIX.nsys-rep, PREFIX.sqlite, PREFIX_<report>.csv,
#                    PREFIX.json (run report), PREFIX.log (program and nsys output), PREFIX.untraced.json
#                    (the untraced run's report) and PREFIX.untraced.log (its output)
#   --binary PATH    the training binary (default: $TRAIN_BIN, else build/bin/train_resnet50)
#   --nproc N        N data-parallel ranks on this machine, one nsys per rank:
#                      torchrun --standalone --nproc-per-node N --no-python nsys profile ...
#                        --output=PREFIX.rank%q{RANK} PROGRAM ARGS... --report PREFIX.json
#                    (scripts/launch_local.sh N -- nsys profile ... when torchrun is not on PATH, or
#                    with PROFILE_LAUNCHER=local; PROFILE_LAUNCHER=torchrun insists on torchrun).
#                    Outputs are per rank, PREFIX.rank<r> in place of PREFIX (train_resnet50 writes
#                    PREFIX.rank<r>.json itself), except the one PREFIX.log of all ranks; the untraced
#                    run is the same launcher line without nsys, each rank's report
#                    PREFIX.untraced.rank<r>.json
#   --repeat N       N captures, each followed by its untraced run (capture 1, untraced 1, capture 2, ...;
#                    default 1). With N > 1 capture k's outputs are named PREFIX.k: PREFIX.k.nsys-rep,
#                    .sqlite, .json, .untraced.json, PREFIX.k_<report>.csv; PREFIX.log holds every
#                    capture's output, PREFIX.untraced.log every untraced run's. Not with --nproc
#   --no-untraced    no untraced run
#   --lean           nsys --trace=cuda,nvtx: the article's options without the OS runtime trace (osrt),
#                    which no analysis reads (it shows pthread and syscall waits in the GUI only)
#   --nsys-opt OPT   one more nsys profile option, as given (repeatable), e.g. --osrt-threshold=10000
#                    or --cuda-flush-interval=10000; what each costs is in README, "Capturing and reading"
#   --analyze        also run scripts/analyze.py on the export, with the untraced run's report (into
#                    PREFIX_analysis/); with --repeat N > 1, each capture's summary into PREFIX.k_analysis/
#                    (with every untraced report), the median capture by traced images/s (the lower
#                    middle one of an even N) in full, figures too, into PREFIX_analysis/, and the spread
#                    of the headline figures across the captures into PREFIX_repeats.json and
#                    PREFIX_repeats.md; with --nproc, each rank into PREFIX.rank<r>_analysis/ and the
#                    ranks compared in PREFIX_ranks_analysis/ (ranks.md)
#   --dry-run        print every command in order (captures, untraced runs, exports, analyses), run
#                    nothing (but train_resnet50 --print-config, see below)
#
# Arguments other than these, and arguments after `--` that start with `-`, go to the training binary.
# Before anything runs (--dry-run included), the binary is asked for the run's configuration with those
# arguments plus --print-config: flags it refuses stop here (exit 2, its message passed on). When the
# configuration has cuda_graph, nsys also gets --cuda-graph-trace=node: each replay's kernels, copies and
# memsets as their own records (by default nsys records a replay as one graph range, not its kernels),
# unless --nsys-opt gives --cuda-graph-trace itself.
# After `--`, a first word that is not a flag starts a different command to wrap instead, e.g.
#   scripts/profile.sh --prefix out/py_reuse8 -- python3 peer/seed_workload.py ROOT --steps 8
# train_resnet50 gets `--report PREFIX.json` unless its configuration has a report (then that report is
# copied to PREFIX.json; with --nproc each rank's, REPORT with .rank<r> before its extension, to
# PREFIX.rank<r>.json);
# for other commands the last stdout line that is a JSON object becomes PREFIX.json (not with --nproc:
# the ranks' output is interleaved in PREFIX.log).
#
# The untraced run, right after its capture, is the same command without nsys: Nsight Systems' CUDA trace
# slows every runtime call, and a thread making hundreds a step (the GPU decode stage) can leave a traced
# device starved that runs at its ceiling untraced. train_resnet50 gets `--report PREFIX.untraced.json` in
# place of any --report of its arguments; a wrapped command's last JSON stdout line becomes
# PREFIX.untraced.json (none under --nproc). analyze.py reads it (--untraced): summary.md's "Capture cost"
# says what the tracing cost and whether the capture is tracer-bound. The untraced run never shares the
# capture's --checkpoint-dir: it gets a private temporary directory instead (with --resume, holding a copy
# of the checkpoint the capture resumed from), removed after it.
#
# The binary is checked first, --dry-run included: a path must be an executable file, a bare name a
# program on PATH. Before a capture, every output (PREFIX.nsys-rep, .sqlite, .json, .untraced.json, .log,
# .untraced.log, the CSVs; per rank with --nproc, per capture with --repeat) is checked: a directory, FIFO
# or socket there stops the run (symlinks are followed, /dev/null is fine). Stale outputs of an earlier run
# are removed first (a symlink's target, the link kept; never a device or FIFO); PREFIX.json is written
# atomically (scripts/lib/output_files.sh).
#
# Exit status: the program's when it fails, traced or untraced (with --nproc, the launcher's); 2 usage
# errors, nsys, the launcher, the binary (missing, a directory, not executable) or a Python to read its
# configuration missing, flags the binary refuses, an output path that cannot be written; 1 no capture
# (.nsys-rep, of any rank) produced, export / stats / analyze.py failed, or PREFIX.json could not be written.
set -uo pipefail

# shellcheck disable=SC2054  # the commas belong to --trace's value
readonly NSYS_PROFILE_OPTS=(--trace=cuda,nvtx,osrt --sample=none --cpuctxsw=none
  --capture-range=cudaProfilerApi --capture-range-end=stop)
readonly STATS_REPORTS=nvtx_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_api_sum

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(dirname "$script_dir")
# shellcheck source=scripts/lib/find_python.sh
source "$script_dir/lib/find_python.sh"
# shellcheck source=scripts/lib/output_files.sh
source "$script_dir/lib/output_files.sh"

# The logs this invocation has begun (each is truncated by its first run, appended to by the next), and
# the file holding the last run's output alone (a wrapped command's report line is read from it).
declare -A logs_begun=()
run_output=""
untraced_checkpoints=""  # set below, when the untraced run needs a checkpoint directory of its own
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  [[ -z $run_output ]] || rm -f -- "$run_output"
  [[ -z $untraced_checkpoints || $dry_run == 1 ]] || rm -rf -- "$untraced_checkpoints"
}

# run_logged LOG WHAT WHERE CMD...: runs CMD with its output on stdout, in LOG and in $run_output; exits
# with CMD's status when it failed (WHAT names the run in the message, WHERE adds "from <launcher>").
run_logged() {
  local log=$1 what=$2 where=$3 status append=()
  shift 3
  if [[ -z $run_output ]]; then
    run_output=$(mktemp "${TMPDIR:-/tmp}/profile_sh.XXXXXXXX") || die "cannot create a temporary file" 1
    trap cleanup EXIT
  fi
  [[ -n ${logs_begun[$log]:-} ]] && append=(-a)
  logs_begun[$log]=1
  echo "profile.sh: $(show_cmd "$@")" >&2
  "$@" 2>&1 | tee ${append[@]+"${append[@]}"} "$log" | tee "$run_output"
  status=${PIPESTATUS[0]}
  if ((status != 0)); then
    echo "profile.sh: error: $what failed (exit $status${where:+ $where}); output in $log" >&2
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

# positive_int FLAG VALUE WHAT: VALUE in base 10 when it is a positive integer, else a usage error.
positive_int() {
  if ! [[ $2 =~ ^[0-9]{1,6}$ ]] || ((10#$2 < 1)); then
    usage_error "expected $1 to be a positive integer ($3), got '$2'"
  fi
  echo $((10#$2))
}

prefix=""
binary="${TRAIN_BIN:-}"
binary_flag=0
analyze=0
dry_run=0
nproc=""
nproc_given=0
repeat=1
untraced=1
lean=0
extra_nsys=()
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
    --repeat) (($# >= 2)) || usage_error "expected a value after --repeat"; repeat=$2; shift 2 ;;
    --repeat=*) repeat=${1#*=}; shift ;;
    --no-untraced) untraced=0; shift ;;
    --lean) lean=1; shift ;;
    --nsys-opt) (($# >= 2)) || usage_error "expected a value after --nsys-opt"; extra_nsys+=("$2"); shift 2 ;;
    --nsys-opt=*) extra_nsys+=("${1#*=}"); shift ;;
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
  nproc=$(positive_int --nproc "$nproc" "ranks on this machine") || exit 2
fi
repeat=$(positive_int --repeat "$repeat" "captures, each with its untraced run") || exit 2
# Repeated captures of several ranks would need a ranks analysis per repeat and a spread of ranks
# comparisons; run profile.sh once per repeat with its own --prefix instead.
if ((nproc_given && repeat > 1)); then
  usage_error "--repeat $repeat conflicts with --nproc $nproc: repeated captures of several ranks are not supported (run profile.sh once per repeat, each with its own --prefix)"
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

# check_outputs PATH...: each output file can be written, and each PATH ending in `/` (an analysis
# directory) is a directory or absent, else exit 2 naming --prefix and the path, before anything runs.
check_outputs() {
  local path why
  for path in "$@"; do
    if [[ $path == */ ]]; then
      path=${path%/}
      [[ -e $path && ! -d $path ]] && die "--prefix $prefix: $path: is not a directory (--analyze writes there)" 2
      continue
    fi
    why=$(output_problem "$path") || die "--prefix $prefix: $path: $why" 2
  done
  return 0
}

# capture_outputs PFX: the files of the capture PFX (appended to the array outputs).
capture_outputs() {
  local rep
  outputs+=("$1.nsys-rep" "$1.sqlite" "$1.json")
  for rep in ${STATS_REPORTS//,/ }; do outputs+=("${1}_$rep.csv"); done
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
  # Four NUL-terminated fields: cuda_graph (1 or 0), the --report path ("" when none), the
  # --checkpoint-dir ("" when none) and resume (1 or 0); or "!" and why not.
  mapfile -d '' -t fields < <("$py" -c '
import json, sys
try:
    c = json.loads(sys.stdin.read())
    why = None if isinstance(c, dict) else "not an object"
except ValueError as e:
    c, why = None, "not JSON (%s)" % e
if why is None and not (isinstance(c.get("cuda_graph"), bool) and isinstance(c.get("report"), str)):
    why = "no boolean cuda_graph and string report"
if why:
    sys.stdout.write("!\0%s\0\0\0" % why)
else:
    sys.stdout.write("%s\0%s\0%s\0%s\0" % (int(c["cuda_graph"]), c["report"],
                     c.get("checkpoint_dir", ""), int(bool(c.get("resume", False)))))
' <<<"$config")
  if ((${#fields[@]} != 4)) || [[ ${fields[0]} == '!' ]]; then
    die "expected $(show_cmd "${command[@]}" --print-config) to print the run's configuration as one JSON object, got ${fields[1]:-nothing readable}: ${config:0:200}" 2
  fi
  cuda_graph=${fields[0]}
  given_report=${fields[1]}
  given_checkpoints=${fields[2]}
  given_resume=${fields[3]}
}

is_train=0
[[ $(basename -- "${command[0]}") == train_resnet50* ]] && is_train=1
given_report=""
given_checkpoints=""
given_resume=0
nsys_opts=("${NSYS_PROFILE_OPTS[@]}")
# shellcheck disable=SC2054  # the comma belongs to --trace's value
((lean)) && nsys_opts=(--trace=cuda,nvtx "${NSYS_PROFILE_OPTS[@]:1}")
for opt in "${extra_nsys[@]}"; do
  [[ $opt == -* ]] || usage_error "expected --nsys-opt to be an nsys profile option (starting with -), got '$opt'"
  nsys_opts+=("$opt")
done
if ((is_train)); then
  read_train_config
  # node unless the user chose the graph trace level with --nsys-opt (graph: one range a replay)
  if ((cuda_graph)) && [[ " ${extra_nsys[*]} " != *" --cuda-graph-trace"* ]]; then
    nsys_opts+=(--cuda-graph-trace=node)
  fi
fi

# set_traced_cmd PFX REPORT: traced_cmd, the program of capture PFX: train_resnet50 gets --report REPORT
# unless its configuration has a report of its own (copied to REPORT afterwards).
set_traced_cmd() {
  traced_cmd=("${command[@]}")
  ((is_train)) && [[ -z $given_report ]] && traced_cmd+=(--report "$2")
  return 0
}

# The untraced run's checkpoints: never the capture's directory (it would resume from the capture's
# last epoch, or overwrite it), but a private one, made before each capture (holding a copy of the
# checkpoint the capture resumes from, with --resume) and removed after the untraced run.
if ((is_train && untraced)) && [[ -n $given_checkpoints ]]; then
  if ((dry_run)); then
    untraced_checkpoints="${TMPDIR:-/tmp}/profile_sh_checkpoints.XXXXXXXX"
  else
    untraced_checkpoints=$(mktemp -d "${TMPDIR:-/tmp}/profile_sh_checkpoints.XXXXXXXX") ||
      die "cannot create a temporary directory for the untraced run's checkpoints" 1
    trap cleanup EXIT
  fi
fi

# untraced_checkpoints_prepare: before a capture, the untraced run's directory emptied, with a copy of
# the newest checkpoint the capture resumes from.
untraced_checkpoints_prepare() {
  [[ -n $untraced_checkpoints ]] || return 0
  local newest
  if ! { rm -rf -- "$untraced_checkpoints" && mkdir -p -- "$untraced_checkpoints"; }; then
    die "cannot make $untraced_checkpoints, the untraced run's checkpoint directory" 1
  fi
  ((given_resume)) || return 0
  newest=$(find "$given_checkpoints" -maxdepth 1 -type f -name 'checkpoint-e*.ckpt' 2>/dev/null | sort | tail -n 1)
  [[ -z $newest ]] || cp -- "$newest" "$untraced_checkpoints/" ||
    die "cannot copy $newest for the untraced run" 1
}

# set_untraced_cmd REPORT: untraced_cmd, the program without nsys: train_resnet50 with any --report of its
# arguments removed and --report REPORT added (its own report, whatever the user's says), and its
# --checkpoint-dir, --resume and --start-over replaced by the private directory (resumed from when the
# capture resumed); a wrapped command as it is.
set_untraced_cmd() {
  local word skip=0
  untraced_cmd=()
  if ((!is_train)); then
    untraced_cmd=("${command[@]}")
    return 0
  fi
  for word in "${command[@]}"; do
    if ((skip)); then skip=0; continue; fi
    case $word in
      --report | --checkpoint-dir) skip=1 ;;
      --report=* | --checkpoint-dir=* | --resume | --resume=* | --start-over | --start-over=*) ;;
      *) untraced_cmd+=("$word") ;;
    esac
  done
  untraced_cmd+=(--report "$1")
  if [[ -n $untraced_checkpoints ]]; then
    untraced_cmd+=(--checkpoint-dir "$untraced_checkpoints")
    ((given_resume)) && untraced_cmd+=(--resume)
  fi
  return 0
}

# set_export_cmd PFX, set_stats_cmd PFX: export_cmd and stats_cmd for the capture PFX.nsys-rep.
set_export_cmd() { export_cmd=(nsys export --type=sqlite --force-overwrite=true "--output=$1.sqlite" "$1.nsys-rep"); }
set_stats_cmd() {
  stats_cmd=(nsys stats "--report=$STATS_REPORTS" --format=csv --force-overwrite=true "--output=$1" "$1.sqlite")
}

# export_and_stats PFX WHAT: PFX.nsys-rep exported to PFX.sqlite and its stats CSVs, each command
# shown first; exits 1 naming WHAT ("for rank 1", "of out/x") when nsys fails.
export_and_stats() {
  set_export_cmd "$1"
  echo "profile.sh: $(show_cmd "${export_cmd[@]}")" >&2
  "${export_cmd[@]}" || die "nsys export $2 failed (exit $?)" 1
  set_stats_cmd "$1"
  echo "profile.sh: $(show_cmd "${stats_cmd[@]}")" >&2
  "${stats_cmd[@]}" || die "nsys stats $2 failed (exit $?)" 1
}

# analysis_python: the Python analyze.py runs with (one with matplotlib); a dry run shows python3 when
# there is none.
analysis_python() {
  if ! py=$(find_python matplotlib); then
    ((dry_run)) || die "no Python with matplotlib for analyze.py (tried \$PYTHON, python3, /usr/bin/python3); install python3-matplotlib" 1
    py=python3
  fi
}

# rank_path PATH R: PATH with .rank<R> before its extension, as train_resnet50 names each rank's
# report (lib/distributed/launch_env.cpp, rank_output_path: out/run.json -> out/run.rank0.json,
# out/run -> out/run.rank0).
rank_path() {
  local dir="" base=$1 stem
  if [[ $1 == */* ]]; then dir=${1%/*}/; base=${1##*/}; fi
  stem=${base%.*}
  if [[ $base == *.* && -n $stem ]]; then echo "$dir$stem.rank$2.${base##*.}"; else echo "$1.rank$2"; fi
}

# save_report_line PATH: the last line of the last run's output that is a JSON object (a wrapped
# command's report) into PATH, atomically; a warning when there is none.
save_report_line() {
  local line
  line=$(grep -E '^[[:space:]]*\{.*\}[[:space:]]*$' "$run_output" | tail -n 1)
  if [[ -n $line ]]; then
    printf '%s\n' "$line" | write_file "$1" || die "cannot write the run report $1" 1
  else
    echo "profile.sh: warning: no JSON report line in the program's output; no $1" >&2
  fi
}

# launcher_cmd CMD...: launch_cmd, CMD started on $nproc ranks by $launcher.
launcher_cmd() {
  if [[ $launcher == torchrun ]]; then
    launch_cmd=(torchrun --standalone --nproc-per-node "$nproc" --no-python "$@")
  else
    launch_cmd=("$script_dir/launch_local.sh" "$nproc" -- "$@")
  fi
}

# set_ranks_cmds: --nproc N's commands and paths (globals): the launcher, traced_launch (one nsys per rank),
# untraced_launch (the same launcher line without nsys; ranks_untraced 0 when there is none), and the
# ranks' exports, analysis directories and untraced reports as analyze.py's arguments.
set_ranks_cmds() {
  local r
  set_traced_cmd "$prefix" "$prefix.json"
  local nsys_cmd=(nsys profile "${nsys_opts[@]}" --force-overwrite=true "--output=$prefix.rank%q{RANK}"
                  "${traced_cmd[@]}")
  launcher=${PROFILE_LAUNCHER:-auto}
  case $launcher in
    auto) if command -v torchrun >/dev/null 2>&1; then launcher=torchrun; else launcher=local; fi ;;
    torchrun | local) ;;
    *) usage_error "expected PROFILE_LAUNCHER to be torchrun, local or auto, got '$launcher'" ;;
  esac
  launcher_cmd "${nsys_cmd[@]}"
  traced_launch=("${launch_cmd[@]}")
  ranks_untraced=$untraced
  untraced_launch=()
  if ((ranks_untraced && !is_train)); then
    echo "profile.sh: warning: no untraced run for a wrapped command under --nproc (no report could be read from its ranks' interleaved output)" >&2
    ranks_untraced=0
  fi
  if ((ranks_untraced)); then
    set_untraced_cmd "$prefix.untraced.json"
    launcher_cmd "${untraced_cmd[@]}"
    untraced_launch=("${launch_cmd[@]}")
  fi
  sqlites=() outs=() untraced_args=()
  for ((r = 0; r < nproc; r++)); do
    sqlites+=("$prefix.rank$r.sqlite")
    outs+=(--rank-out "$prefix.rank${r}_analysis")
    ((ranks_untraced)) && untraced_args+=(--untraced "$prefix.untraced.rank$r.json")
  done
  return 0
}

# ranks_dry_run: --nproc N --dry-run: every command in order, then exit 0.
ranks_dry_run() {
  local r reports=()
  show_cmd "${traced_launch[@]}"
  ((ranks_untraced)) && show_cmd "${untraced_launch[@]}"
  for ((r = 0; r < nproc; r++)); do
    set_export_cmd "$prefix.rank$r"
    show_cmd "${export_cmd[@]}"
    set_stats_cmd "$prefix.rank$r"
    show_cmd "${stats_cmd[@]}"
    reports+=(--report "$prefix.rank$r.json")
  done
  if ((analyze)); then
    analysis_python
    show_cmd "$py" "$script_dir/analyze.py" "${sqlites[@]}" "${reports[@]}" "${untraced_args[@]}" "${outs[@]}" \
      --out "${prefix}_ranks_analysis"
  fi
  exit 0
}

# ranks_prepare: nsys and the launcher there, every rank's output writable, stale outputs removed.
ranks_prepare() {
  local r outputs=("$prefix.log")
  command -v nsys >/dev/null 2>&1 ||
    die "nsys (Nsight Systems CLI) is not on PATH; install Nsight Systems or add its bin/ directory to PATH" 2
  if [[ $launcher == torchrun ]]; then
    command -v torchrun >/dev/null 2>&1 ||
      die "torchrun is not on PATH (PROFILE_LAUNCHER=torchrun); unset PROFILE_LAUNCHER to use scripts/launch_local.sh" 2
  fi
  ((ranks_untraced)) && outputs+=("$prefix.untraced.log")
  for ((r = 0; r < nproc; r++)); do
    capture_outputs "$prefix.rank$r"
    ((ranks_untraced)) && outputs+=("$prefix.untraced.rank$r.json")
    ((analyze)) && outputs+=("$prefix.rank${r}_analysis/")
  done
  ((analyze)) && outputs+=("${prefix}_ranks_analysis/")
  check_outputs "${outputs[@]}"
  mkdir -p -- "$(dirname -- "$prefix")" || die "cannot create the directory of $prefix" 1
  # Stale outputs would hide a rank whose capture (or untraced run) never started. (Logs are truncated by tee.)
  for ((r = 0; r < nproc; r++)); do
    remove_stale "$prefix.rank$r.nsys-rep" "$prefix.rank$r.sqlite" "$prefix.untraced.rank$r.json"
    ((is_train)) && [[ -z $given_report ]] && remove_stale "$prefix.rank$r.json"
  done
  return 0
}

# ranks_reports: each rank's report as PREFIX.rank<r>.json (a given --report's copied), into reports
# (analyze.py's --report arguments).
ranks_reports() {
  local r rp src
  reports=()
  if ((!is_train)); then
    echo "profile.sh: warning: no run reports for a wrapped command under --nproc (its ranks' output is interleaved in $prefix.log)" >&2
  fi
  for ((r = 0; r < nproc; r++)); do
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
  done
  return 0
}

# ranks_listing: what a --nproc run wrote, on stdout.
ranks_listing() {
  local r rp rep
  echo
  for ((r = 0; r < nproc; r++)); do
    rp="$prefix.rank$r"
    echo "rank $r:"
    echo "capture:     $rp.nsys-rep"
    echo "sqlite:      $rp.sqlite"
    for rep in ${STATS_REPORTS//,/ }; do
      printf '%-12s %s\n' "$rep:" "${rp}_$rep.csv"
    done
    if [[ -f $rp.json ]]; then echo "run report:  $rp.json"; fi
    if [[ -f $prefix.untraced.rank$r.json ]]; then echo "untraced:    $prefix.untraced.rank$r.json"; fi
    if ((analyze)); then echo "analysis:    ${rp}_analysis/summary.md"; fi
  done
  echo "log:         $prefix.log"
  if ((ranks_untraced)); then echo "untraced log: $prefix.untraced.log"; fi
  if ((analyze)); then echo "ranks:       ${prefix}_ranks_analysis/ranks.md"; fi
}

# profile_ranks: --nproc N. One nsys per rank (a single nsys around the launcher would record every rank
# in one report, where how the ranks' cudaProfilerStart/Stop calls combine is undocumented), each
# naming its report after RANK from its environment; then the untraced launch, export, stats and analysis
# per rank, and the ranks compared. Uses the globals set above; exits like the single-process path.
profile_ranks() {
  local r missing=()
  set_ranks_cmds
  ((dry_run)) && ranks_dry_run
  ranks_prepare
  ((ranks_untraced)) && untraced_checkpoints_prepare

  run_logged "$prefix.log" "the profiled program" "from $launcher" "${traced_launch[@]}"
  for ((r = 0; r < nproc; r++)); do
    [[ -f $prefix.rank$r.nsys-rep ]] || missing+=("$prefix.rank$r.nsys-rep")
  done
  ((${#missing[@]} == 0)) ||
    die "nsys produced no ${missing[*]}: the capture range never started on those ranks (the program must call cudaProfilerStart; check $prefix.log)" 1
  ranks_reports

  if ((ranks_untraced)); then
    run_logged "$prefix.untraced.log" "the untraced run" "from $launcher" "${untraced_launch[@]}"
    [[ -z $untraced_checkpoints ]] || rm -rf -- "$untraced_checkpoints"
    for ((r = 0; r < nproc; r++)); do
      [[ -f $prefix.untraced.rank$r.json ]] ||
        { echo "profile.sh: warning: rank $r's untraced run wrote no $prefix.untraced.rank$r.json" >&2; untraced_args=(); }
    done
  fi

  for ((r = 0; r < nproc; r++)); do export_and_stats "$prefix.rank$r" "for rank $r"; done

  if ((analyze)); then
    analysis_python
    if ((${#reports[@]} != 2 * nproc)); then
      ((${#reports[@]} == 0)) || echo "profile.sh: warning: not every rank has a run report; analyzing without reports" >&2
      reports=()
    fi
    local analyze_cmd=("$py" "$script_dir/analyze.py" "${sqlites[@]}" "${reports[@]}" "${untraced_args[@]}"
                       "${outs[@]}" --out "${prefix}_ranks_analysis")
    echo "profile.sh: $(show_cmd "${analyze_cmd[@]}")" >&2
    "${analyze_cmd[@]}" || die "analyze.py failed (exit $?)" 1
  fi
  ranks_listing
  exit 0
}
((nproc_given == 0)) || profile_ranks

# One process: capture k's outputs are named ${pfxs[k-1]} (PREFIX itself when there is one capture).
pfxs=()
if ((repeat == 1)); then
  pfxs=("$prefix")
else
  for ((k = 1; k <= repeat; k++)); do pfxs+=("$prefix.$k"); done
fi
analysis_dir="${prefix}_analysis"

# set_analyze_cmd: analyze_cmd, the analysis of every capture with the reports there are (a dry run
# assumes them all): one capture into PREFIX_analysis/; several with --repeats (analyze.py).
set_analyze_cmd() {
  local pfx sqlites=() reports=() unreports=() outs=()
  for pfx in "${pfxs[@]}"; do
    sqlites+=("$pfx.sqlite")
    if ((dry_run)) || [[ -f $pfx.json ]]; then reports+=(--report "$pfx.json"); fi
    if ((untraced)) && { ((dry_run)) || [[ -f $pfx.untraced.json ]]; }; then unreports+=(--untraced "$pfx.untraced.json"); fi
    outs+=(--repeat-out "${pfx}_analysis")
  done
  analyze_cmd=("$py" "$script_dir/analyze.py" "${sqlites[@]}")
  if ((repeat > 1)); then
    analyze_cmd+=(--repeats "${reports[@]}" "${unreports[@]}" "${outs[@]}" --out "$analysis_dir"
                  --repeats-json "${prefix}_repeats.json" --repeats-md "${prefix}_repeats.md")
  else
    analyze_cmd+=("${reports[@]}" "${unreports[@]}" --out "$analysis_dir")
  fi
}

if ((dry_run)); then
  for pfx in "${pfxs[@]}"; do
    set_traced_cmd "$pfx" "$pfx.json"
    show_cmd nsys profile "${nsys_opts[@]}" --force-overwrite=true "--output=$pfx" "${traced_cmd[@]}"
    if ((untraced)); then
      set_untraced_cmd "$pfx.untraced.json"
      show_cmd "${untraced_cmd[@]}"
    fi
  done
  for pfx in "${pfxs[@]}"; do
    set_export_cmd "$pfx"
    show_cmd "${export_cmd[@]}"
    set_stats_cmd "$pfx"
    show_cmd "${stats_cmd[@]}"
  done
  if ((analyze)); then
    analysis_python
    set_analyze_cmd
    show_cmd "${analyze_cmd[@]}"
  fi
  exit 0
fi

command -v nsys >/dev/null 2>&1 ||
  die "nsys (Nsight Systems CLI) is not on PATH; install Nsight Systems or add its bin/ directory to PATH" 2

outputs=("$prefix.log")
((untraced)) && outputs+=("$prefix.untraced.log")
for pfx in "${pfxs[@]}"; do
  capture_outputs "$pfx"
  ((untraced)) && outputs+=("$pfx.untraced.json")
  ((analyze && repeat > 1)) && outputs+=("${pfx}_analysis/")
done
((analyze)) && outputs+=("$analysis_dir/")
((analyze && repeat > 1)) && outputs+=("${prefix}_repeats.json" "${prefix}_repeats.md")
check_outputs "${outputs[@]}"
mkdir -p -- "$(dirname -- "$prefix")" || die "cannot create the directory of $prefix" 1
# Stale outputs would hide a capture (or untraced run) that never happened. (Logs are truncated by tee.)
for pfx in "${pfxs[@]}"; do
  remove_stale "$pfx.nsys-rep" "$pfx.sqlite" "$pfx.untraced.json"
  ((is_train)) && [[ -z $given_report ]] && remove_stale "$pfx.json"
done

# capture_and_untraced PFX: capture PFX, its run report into PFX.json, then (unless --no-untraced) its
# untraced run with its report in PFX.untraced.json.
capture_and_untraced() {
  local pfx=$1
  set_traced_cmd "$pfx" "$pfx.json"
  ((untraced)) && untraced_checkpoints_prepare
  run_logged "$prefix.log" "the profiled program" "" \
    nsys profile "${nsys_opts[@]}" --force-overwrite=true "--output=$pfx" "${traced_cmd[@]}"
  [[ -f $pfx.nsys-rep ]] ||
    die "nsys produced no $pfx.nsys-rep: the capture range never started (the program must call cudaProfilerStart; check $prefix.log)" 1
  if [[ -n $given_report ]]; then
    if [[ -f $given_report ]]; then
      [[ $given_report -ef $pfx.json ]] || write_file "$pfx.json" <"$given_report" || die "cannot copy $given_report to $pfx.json" 1
    else
      echo "profile.sh: warning: the program wrote no report at $given_report" >&2
    fi
  elif ((!is_train)); then
    save_report_line "$pfx.json"  # a wrapped command (the Python reference) prints its report as one JSON line
  fi
  [[ -f $pfx.json ]] || echo "profile.sh: warning: no run report at $pfx.json" >&2
  ((untraced)) || return 0
  set_untraced_cmd "$pfx.untraced.json"
  run_logged "$prefix.untraced.log" "the untraced run" "" "${untraced_cmd[@]}"
  [[ -z $untraced_checkpoints ]] || rm -rf -- "$untraced_checkpoints"
  ((is_train)) || save_report_line "$pfx.untraced.json"
  [[ -f $pfx.untraced.json ]] || echo "profile.sh: warning: no untraced run report at $pfx.untraced.json" >&2
  return 0
}

for pfx in "${pfxs[@]}"; do capture_and_untraced "$pfx"; done

for pfx in "${pfxs[@]}"; do export_and_stats "$pfx" "of $pfx"; done

if ((analyze)); then
  analysis_python
  if ((repeat > 1)); then
    for pfx in "${pfxs[@]}"; do
      [[ -f $pfx.json ]] || die "--repeat $repeat --analyze needs every capture's run report (the median capture is chosen by its images/s); no $pfx.json" 1
    done
  fi
  set_analyze_cmd
  echo "profile.sh: $(show_cmd "${analyze_cmd[@]}")" >&2
  "${analyze_cmd[@]}" || die "analyze.py failed (exit $?)" 1
fi

echo
for pfx in "${pfxs[@]}"; do
  ((repeat == 1)) || echo "capture ${pfx##*.}:"
  echo "capture:     $pfx.nsys-rep"
  echo "sqlite:      $pfx.sqlite"
  for r in ${STATS_REPORTS//,/ }; do
    printf '%-12s %s\n' "$r:" "${pfx}_$r.csv"
  done
  if [[ -f $pfx.json ]]; then echo "run report:  $pfx.json"; fi
  if [[ -f $pfx.untraced.json ]]; then echo "untraced:    $pfx.untraced.json"; fi
  if ((analyze && repeat > 1)); then echo "summary:     ${pfx}_analysis/summary.md"; fi
done
echo "log:         $prefix.log"
if ((untraced)); then echo "untraced log: $prefix.untraced.log"; fi
if ((analyze)); then echo "analysis:    $analysis_dir/summary.md"; fi
if ((analyze && repeat > 1)); then echo "repeats:     ${prefix}_repeats.md"; fi
exit 0
