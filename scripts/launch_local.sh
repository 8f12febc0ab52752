#!/usr/bin/env bash
# Launches N ranks of a program on this machine with the environment torchrun gives its workers
# (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*), for
# machines without a working torchrun (Debian 12's torchrun 1.13 crashes on Python 3.11). Rank 0
# serves the rendezvous store, as under a plain launcher.
#
# usage: scripts/launch_local.sh N [--port P] [--log-dir DIR] -- PROGRAM [ARGS...]
#
#   N              ranks (1..64)
#   --port P       MASTER_PORT (default: MASTER_PORT if set, else a free port)
#   --log-dir DIR  each rank's output to DIR/rank<r>.log as well as here
#
# SIGINT and SIGTERM are passed on to every rank, as torchrun does. The ranks end on their own
# (a rank that dies makes the others fail within their --dist-timeout-s): this script waits for all
# of them. Exit status: 0 when every rank exited 0, else the first nonzero status by rank order
# (a rank killed by a signal counts as 128 + the signal); 2 for usage errors.
set -uo pipefail
# Job control: each rank in its own process group, with SIGINT not ignored (a plain background job
# would ignore it); signals reach the ranks only through forward() below, as under torchrun.
set -m

usage() { sed -n '7,11s/^# \{0,1\}//p' "$0"; }
die_usage() { echo "launch_local.sh: error: $1" >&2; usage >&2; exit 2; }

[ $# -ge 1 ] || die_usage "expected the number of ranks"
case "$1" in -h|--help) usage; exit 0 ;; esac
n=$1
shift
[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 64 ] || die_usage "N: expected 1..64, got '$n'"
port=${MASTER_PORT:-}
log_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port=${2:-}; shift 2 ;;
    --log-dir) log_dir=${2:-}; shift 2 ;;
    --) shift; break ;;
    *) die_usage "unknown argument '$1' (the program comes after --)" ;;
  esac
done
[ $# -ge 1 ] || die_usage "expected a program after --"
if [ -z "$port" ]; then
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null) ||
    port=$((20000 + RANDOM % 20000))
fi
[[ $port =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] || die_usage "--port: expected 1..65535, got '$port'"
[ -n "$log_dir" ] && { mkdir -p "$log_dir" || die_usage "--log-dir: cannot create '$log_dir'"; }

pids=()
forward() {  # pass a signal on to every rank still running
  local sig=$1 pid
  for pid in "${pids[@]}"; do kill "-$sig" "$pid" 2>/dev/null; done
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

status=0
for ((r = 0; r < n; r++)); do
  # wait returns early when a trapped signal arrives: wait again until the rank has ended.
  while true; do
    wait "${pids[r]}"
    rc=$?
    kill -0 "${pids[r]}" 2>/dev/null || break
  done
  if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then status=$rc; fi
done
exit "$status"
