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
#
# SIGINT and SIGTERM are passed on to every rank, as torchrun does. The ranks end on their own
# (a rank that dies or freezes makes the others stop within their --dist-peer-timeout-s, and a
# rendezvous that cannot complete ends within --dist-timeout-s): this script waits for them. Once
# a rank has exited nonzero, those still running S seconds later get SIGTERM and, S seconds after
# that, SIGKILL, as torchrun's SIGTERM and SIGKILL (a frozen rank takes nothing else).
# Each rank's log (--log-dir) is written in place by tee, a symlink followed; a directory, FIFO or socket
# where a log goes is a usage error (scripts/lib/output_files.sh).
# Exit status: 0 when every rank exited 0, else the first nonzero status by rank order (a rank
# killed by a signal counts as 128 + the signal); 2 for usage errors, for a PROGRAM that is not
# an executable file and for a --log-dir whose logs cannot be written (nothing is launched then).
set -uo pipefail
# Job control: each rank in its own process group, with SIGINT not ignored (a plain background job
# would ignore it); signals reach the ranks only through forward() below, as under torchrun.
set -m

usage() { sed -n '7,12s/^# \{0,1\}//p' "$0"; }
# shellcheck source=scripts/lib/output_files.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/output_files.sh"
die_usage() { echo "launch_local.sh: error: $1" >&2; usage >&2; exit 2; }

[ $# -ge 1 ] || die_usage "expected the number of ranks"
case "$1" in -h|--help) usage; exit 0 ;; esac
# N in base 10 whatever its leading zeros (bash arithmetic would read 010 as octal 8), checked by its
# digits before any arithmetic (a 20-digit N overflows it); the normalised n is what the ranks see.
n=${1#"${1%%[!0]*}"}
if ! [[ $1 =~ ^[0-9]+$ && $n =~ ^[0-9]{1,2}$ ]] || [ "$n" -gt 64 ]; then die_usage "N: expected 1..64, got '$1'"; fi
shift
port=${MASTER_PORT:-}
log_dir=""
grace=10
while [ $# -gt 0 ]; do
  case "$1" in
    --port | --log-dir | --grace)
      # `--port --log-dir d` is a forgotten value, not a port named --log-dir.
      [ $# -ge 2 ] || die_usage "$1: expected a value"
      [[ $2 != --* ]] || die_usage "$1: expected a value, got the flag '$2'"
      [ -n "$2" ] || die_usage "$1: expected a value, got ''"
      case "$1" in --port) port=$2 ;; --log-dir) log_dir=$2 ;; *) grace=$2 ;; esac
      shift 2 ;;
    --) shift; break ;;
    *) die_usage "unknown argument '$1' (the program comes after --)" ;;
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
  die_usage "--port: expected 1..65535, got '$port'"
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

pids=()
rcs=()  # each rank's exit status once it has ended
forward() {  # pass a signal on to every rank still running
  local sig=$1 r
  for r in "${!pids[@]}"; do
    [ -n "${rcs[r]:-}" ] || kill "-$sig" "${pids[r]}" 2>/dev/null
  done
}
trap 'forward INT' INT
trap 'forward TERM' TERM

for ((r = 0; r < n; r++)); do
  (
    export RANK=$r LOCAL_RANK=$r GROUP_RANK=0 WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n
    export MASTER_ADDR=${MASTER_ADDR:-127.0.0.1} MASTER_PORT=$port
    export TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_USE_AGENT_STORE=False
    export TORCHELASTIC_RUN_ID=${TORCHELASTIC_RUN_ID:-launch_local}
    if [ -n "$log_dir" ]; then
      exec "$@" > >(tee "$log_dir/rank$r.log") 2>&1
    fi
    exec "$@"
  ) &
  pids+=($!)
done

# The ranks have their own stderr; this script's goes elsewhere from here on, because bash reports
# there every rank killed by a signal when it reaps it ("Killed ..."). Its own lines go to the copy.
exec {stderr}>&2 2>/dev/null
now_ms() { local t=${EPOCHREALTIME/[.,]/}; echo $((10#$t / 1000)); }
# Reap ranks as they end. Once one has failed, the others have $grace seconds to end on their own
# (a rank that loses a peer names it and stops within its --dist-peer-timeout-s), then SIGTERM,
# then SIGKILL as many seconds later.
left=$n failed_at="" stage=0
while [ "$left" -gt 0 ]; do
  for ((r = 0; r < n; r++)); do
    if [ -n "${rcs[r]:-}" ] || kill -0 "${pids[r]}" 2>/dev/null; then continue; fi
    wait "${pids[r]}"  # it has ended: its status at once
    rc=$?
    rcs[r]=$rc
    left=$((left - 1))
    if [ "$rc" -ne 0 ] && [ -z "$failed_at" ]; then failed_at=$(now_ms) first=$r; fi
  done
  if [ -n "$failed_at" ] && [ "$left" -gt 0 ]; then
    waited=$(($(now_ms) - failed_at))
    if [ "$stage" -eq 0 ] && [ "$waited" -ge $((grace * 1000)) ]; then
      echo "launch_local.sh: rank $first exited ${rcs[first]}; $left rank(s) still running ${grace} s later: SIGTERM" >&"$stderr"
      forward TERM; stage=1
    elif [ "$stage" -eq 1 ] && [ "$waited" -ge $((2 * grace * 1000)) ]; then
      echo "launch_local.sh: $left rank(s) still running ${grace} s after SIGTERM: SIGKILL" >&"$stderr"
      forward KILL; stage=2
    fi
  fi
  [ "$left" -gt 0 ] && sleep 0.05
done
status=0
for ((r = 0; r < n; r++)); do
  if [ "${rcs[r]}" -ne 0 ] && [ "$status" -eq 0 ]; then status=${rcs[r]}; fi
done
exit "$status"
