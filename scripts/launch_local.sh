#!/usr/bin/env bash
# Launches N ranks of a program on this machine with the environment torchrun gives its workers
# (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*), for
# machines without a working torchrun (Debian 12's torchrun 1.13 crashes on Python 3.11). Rank 0
# serves the rendezvous store, as under a plain launcher.
#
# usage: scripts/launch_local.sh N [--port P] [--log-dir DIR] [--grace S] -- PROGRAM [ARGS...]
#
#   N              ranks (1..64), decimal digits read in base 10 (010 is 10)
#   --port P       MASTER_PORT (default: MASTER_PORT if set, else a free port)
#   --log-dir DIR  each rank's output to DIR/rank<r>.log as well as here
#   --grace S      once a rank has failed, the others' time to end before SIGTERM (default 10)
#   -h, --help     this text (anywhere before --; after it, an argument of PROGRAM)
#
# A flag's value may follow it or an = (--port=29500); a flag given twice is a usage error.
#
# Each rank runs in its own process group, and a signal the launcher sends reaches that whole group
# (a PROGRAM such as `nsys profile` and what it started, as torchrun does): SIGINT and SIGTERM
# are passed on to every rank. The ranks end on their own
# (a rank that dies or freezes makes the others stop within their --dist-peer-timeout-s, and a
# rendezvous that cannot complete ends within --dist-timeout-s): this script waits for them. Once
# a rank has exited nonzero, those still running S seconds later get SIGTERM and, S seconds after
# that, SIGKILL, as torchrun's SIGTERM and SIGKILL (a frozen rank takes nothing else). Processes a
# rank left in its group when it ended get the same (SIGTERM 1 s after the last rank ended, SIGKILL
# S seconds later): nothing a rank started outlives the launcher.
# Each rank's log (--log-dir) is written in place by tee, a symlink followed; a directory, FIFO or socket
# where a log goes is a usage error (scripts/lib/output_files.sh). The signals leave tee alone: a
# rank's last lines reach its log.
# Exit status: 0 when every rank exited 0, else the status of the rank that failed first, the failure
# that made the launcher stop the others (ranks it stopped then do not count; ranks seen ending in
# the same check, every 0.05 s, count in rank order; a rank killed by a signal counts as
# 128 + the signal); 2 for usage errors, for a PROGRAM that is not an executable file and for a
# --log-dir whose logs cannot be written (nothing is launched then).
set -uo pipefail
# Job control: each rank in its own process group, with SIGINT not ignored (a plain background job
# would ignore it); signals reach the ranks only through signal_ranks() below, as under torchrun.
set -m

usage() { sed -n '7,15s/^# \{0,1\}//p' "$0"; }
# shellcheck source=scripts/lib/output_files.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/output_files.sh"
die_usage() { echo "launch_local.sh: error: $1" >&2; usage >&2; exit 2; }

# --help wherever it is among the launcher's own arguments.
for arg in "$@"; do
  case "$arg" in
    --) break ;;
    -h | --help) usage; exit 0 ;;
  esac
done
[ $# -ge 1 ] || die_usage "expected the number of ranks"
# N in base 10 whatever its leading zeros (bash arithmetic would read 010 as octal 8), checked by its
# digits before any arithmetic (a 20-digit N overflows it); the normalised n is what the ranks see.
n=${1#"${1%%[!0]*}"}
if ! [[ $1 =~ ^[0-9]+$ && $n =~ ^[0-9]{1,2}$ ]] || [ "$n" -gt 64 ]; then die_usage "N: expected 1..64, got '$1'"; fi
shift
port=${MASTER_PORT:-}
port_from=MASTER_PORT  # what the port's error names
log_dir=""
grace=10
given=" "  # the flags seen, each once
while [ $# -gt 0 ]; do
  case "$1" in
    --port | --log-dir | --grace)
      flag=$1
      # `--port --log-dir d` is a forgotten value, not a port named --log-dir.
      [ $# -ge 2 ] || die_usage "$flag: expected a value"
      [[ $2 != --* ]] || die_usage "$flag: expected a value, got the flag '$2'"
      value=$2
      shift 2 ;;
    --port=* | --log-dir=* | --grace=*)
      flag=${1%%=*} value=${1#*=}
      shift ;;
    --) shift; break ;;
    *) die_usage "unknown argument '$1' (the program comes after --)" ;;
  esac
  [ -n "$value" ] || die_usage "$flag: expected a value, got ''"
  case "$flag" in
    --port) previous=$port ;;
    --log-dir) previous=$log_dir ;;
    *) previous=$grace ;;
  esac
  [[ $given != *" $flag "* ]] || die_usage "$flag: given twice ('$previous', then '$value')"
  given+="$flag "
  case "$flag" in
    --port) port=$value port_from=--port ;;
    --log-dir) log_dir=$value ;;
    *) grace=$value ;;
  esac
done
[ $# -ge 1 ] || die_usage "expected a program after --"
# Every rank would fail to exec it: say so once, before starting any.
if [[ $1 == */* ]]; then
  program=$1
else
  program=$(type -P -- "$1") || { echo "launch_local.sh: error: PROGRAM: '$1' is not on PATH" >&2; exit 2; }
fi
if [ -d "$program" ]; then
  echo "launch_local.sh: error: PROGRAM: '$program' is a directory" >&2; exit 2
elif [ ! -e "$program" ]; then
  echo "launch_local.sh: error: PROGRAM: no such file '$program'" >&2; exit 2
elif [ ! -x "$program" ]; then
  echo "launch_local.sh: error: PROGRAM: '$program' is not executable" >&2; exit 2
fi
if [ -z "$port" ]; then
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null) ||
    port=$((20000 + RANDOM % 20000))
fi
p=${port#"${port%%[!0]*}"}
if ! [[ $port =~ ^[0-9]+$ && $p =~ ^[0-9]{1,5}$ ]] || [ "$p" -gt 65535 ]; then
  die_usage "$port_from: expected 1..65535, got '$port'"
fi
port=$p
g=${grace#"${grace%%[!0]*}"}
if ! [[ $grace =~ ^[0-9]+$ && ${g:-0} =~ ^[0-9]{1,4}$ ]]; then
  die_usage "--grace: expected seconds, 0..9999, got '$grace'"
fi
grace=${g:-0}
if [ -n "$log_dir" ]; then
  mkdir -p "$log_dir" || die_usage "--log-dir: cannot create '$log_dir'"
  for ((r = 0; r < n; r++)); do
    why=$(output_problem "$log_dir/rank$r.log") || die_usage "--log-dir: $log_dir/rank$r.log: $why"
  done
fi

pids=()  # each rank's pid, which is also its process group's id (set -m)
rcs=()   # each rank's exit status once it has ended
gone=()  # 1 once a rank has ended and its process group holds nothing more
# Sends signal $1 to the process group of every rank with something left in it (the rank, or what
# it started); to the rank alone should its group not be its pid. The group's signal goes through
# the kill program, not bash's: bash's follows SIGTERM or SIGHUP to a stopped job with SIGCONT, and
# the launcher passes on the signal alone, as torchrun does (a stopped rank stays so until SIGKILL).
signal_ranks() {
  local r
  for r in "${!pids[@]}"; do
    [ -z "${gone[r]:-}" ] || continue
    env kill "-$1" -- "-${pids[r]}" 2>/dev/null || kill "-$1" "${pids[r]}" 2>/dev/null
  done
}
trap 'signal_ranks INT' INT
trap 'signal_ranks TERM' TERM

for ((r = 0; r < n; r++)); do
  (
    export RANK=$r LOCAL_RANK=$r GROUP_RANK=0 WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n
    export MASTER_ADDR=${MASTER_ADDR:-127.0.0.1} MASTER_PORT=$port
    export TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_USE_AGENT_STORE=False
    export TORCHELASTIC_RUN_ID=${TORCHELASTIC_RUN_ID:-launch_local}
    if [ -n "$log_dir" ]; then
      # tee is in the rank's group: it ignores what the launcher sends, so that what the rank
      # writes once signalled still reaches the log; it ends when the rank's output closes.
      exec "$@" > >(trap '' INT TERM; exec tee "$log_dir/rank$r.log") 2>&1
    fi
    exec "$@"
  ) &
  pids+=($!)
done

# The ranks have their own stderr; this script's goes elsewhere from here on, because bash reports
# there every rank killed by a signal when it reaps it ("Killed ..."). Its own lines go to the copy.
exec {stderr}>&2 2>/dev/null
now_ms() { local t=${EPOCHREALTIME/[.,]/}; echo $((10#$t / 1000)); }
# Marks gone[r] for each ended rank whose process group has no process left, and sets lingering to
# the number of those that still have one. Zombies do not count: where init does not reap orphans
# (some containers), a killed grandchild stays one.
check_groups() {
  local r f stat rest state want=0
  local -A live=()
  lingering=0
  for r in "${!pids[@]}"; do
    if [ -n "${rcs[r]:-}" ] && [ -z "${gone[r]:-}" ]; then want=1; fi
  done
  [ "$want" -eq 1 ] || return 0
  if [ -r /proc/self/stat ]; then
    for f in /proc/[0-9]*/stat; do
      IFS= read -r stat 2>/dev/null <"$f" || continue
      rest=${stat##*) }           # state ppid pgrp ...
      state=${rest%% *}
      rest=${rest#* }; rest=${rest#* }
      [ "$state" = Z ] || [ "$state" = X ] || live[${rest%% *}]=1
    done
  fi
  for r in "${!pids[@]}"; do
    if [ -z "${rcs[r]:-}" ] || [ -n "${gone[r]:-}" ]; then continue; fi
    if [ -r /proc/self/stat ]; then
      [ -n "${live[${pids[r]}]:-}" ] || { gone[r]=1; continue; }
    else
      kill -0 -- "-${pids[r]}" 2>/dev/null || { gone[r]=1; continue; }
    fi
    lingering=$((lingering + 1))
  done
}
# Reap ranks as they end. Once one has failed, the others have $grace seconds to end on their own
# (a rank that loses a peer names it and stops within its --dist-peer-timeout-s), then SIGTERM,
# then SIGKILL as many seconds later, each to the rank's whole process group. Once every rank has
# ended, what they left in their groups gets the same, from 1 s on (tee's last copy takes less).
left=$n failed_at="" first="" stage=0 ended_at="" term_at="" kill_at=""
while :; do
  for ((r = 0; r < n; r++)); do
    if [ -n "${rcs[r]:-}" ] || kill -0 "${pids[r]}" 2>/dev/null; then continue; fi
    wait "${pids[r]}"  # it has ended: its status at once
    rc=$?
    rcs[r]=$rc
    left=$((left - 1))
    # The first failure is the run's: the ranks stopped because of it come later.
    if [ "$rc" -ne 0 ] && [ -z "$failed_at" ]; then failed_at=$(now_ms) first=$r; fi
  done
  lingering=0
  check_groups
  if [ "$left" -eq 0 ] && [ "$lingering" -eq 0 ]; then break; fi
  t=$(now_ms)
  due=""
  if [ "$left" -gt 0 ]; then
    [ -z "$failed_at" ] || due=$((failed_at + grace * 1000))
  else
    [ -n "$ended_at" ] || ended_at=$t
    due=$((ended_at + 1000))
  fi
  if [ "$stage" -eq 0 ] && [ -n "$due" ] && [ "$t" -ge "$due" ]; then
    if [ "$left" -gt 0 ]; then
      echo "launch_local.sh: rank $first exited ${rcs[first]}; $left rank(s) still running ${grace} s later: SIGTERM" >&"$stderr"
    else
      echo "launch_local.sh: every rank has ended, but the process groups of $lingering still hold processes: SIGTERM" >&"$stderr"
    fi
    signal_ranks TERM; stage=1 term_at=$t
  elif [ "$stage" -eq 1 ] && [ "$t" -ge $((term_at + grace * 1000)) ]; then
    if [ "$left" -gt 0 ]; then
      echo "launch_local.sh: $left rank(s) still running ${grace} s after SIGTERM: SIGKILL" >&"$stderr"
    else
      echo "launch_local.sh: processes left by $lingering rank(s) still running ${grace} s after SIGTERM: SIGKILL" >&"$stderr"
    fi
    signal_ranks KILL; stage=2 kill_at=$t
  elif [ "$stage" -eq 2 ] && [ "$left" -eq 0 ] && [ "$t" -ge $((kill_at + 5000)) ]; then
    # Only what SIGKILL cannot end yet (a process in the kernel's uninterruptible sleep) is left.
    echo "launch_local.sh: processes left by $lingering rank(s) still there 5 s after SIGKILL: not waiting for them" >&"$stderr"
    break
  fi
  sleep 0.05
done
if [ -n "$failed_at" ]; then exit "${rcs[first]}"; fi
exit 0
