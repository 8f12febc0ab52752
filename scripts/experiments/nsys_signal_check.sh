#!/usr/bin/env bash
# Ctrl-C during an Nsight Systems capture, on a GPU machine: does the run stop cleanly and keep a
# usable capture? (docs/BENCHMARKS.md, "Stopping a capture with Ctrl-C under nsys".)
#
# usage: TRAIN_BIN=build/bin/train_resnet50 [MODES="app group"] scripts/experiments/nsys_signal_check.sh DATA OUT
#
# For each mode, starts a 2,000-step capture under the article's nsys options, waits 3 s into the
# captured steps, then sends SIGINT to the training process alone (app) or to the whole process
# group, as a terminal's Ctrl-C does (group). Prints the seconds from the signal to the report line
# and to each exit, the step lines before and after the signal, the report's capture section, and
# analyze.py's checks on the export (the step and copy counts must agree: none lost at the end).
# Run from the repository root; needs nsys on PATH and a CUDA build. This is the script of the
# measurement in docs/BENCHMARKS.md. Outputs OUT/sig_<mode>.* of an earlier check are removed first (a
# symlink's target, never a device or FIFO); a directory, FIFO or socket where one goes is a usage error.
# Exit status: 0 once every mode ran (what it measured is printed, not judged); 2 usage errors (the
# arguments, MODES, TRAIN_BIN not an executable file, nsys missing, an OUT that cannot be written).
set -u
usage() { echo "usage: TRAIN_BIN=build/bin/train_resnet50 [MODES=\"app group\"] $0 DATA OUT" >&2; exit 2; }
die_usage() { echo "nsys_signal_check.sh: error: $1" >&2; exit 2; }
(($# == 2)) || usage
[[ -f ${TRAIN_BIN:-} && -x ${TRAIN_BIN:-} ]] || die_usage "TRAIN_BIN (${TRAIN_BIN:-unset}) is not an executable file"
command -v nsys >/dev/null || die_usage "nsys is not on PATH"
# shellcheck source=scripts/lib/output_files.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/output_files.sh"
data=$1; out=$2
modes=${MODES:-app group}
for mode in $modes; do
  [[ $mode == app || $mode == group ]] || die_usage "MODES: expected app and/or group, got '$mode'"
done
for mode in $modes; do
  for path in "$out/sig_$mode".{log,json,nsys-rep,sqlite}; do
    why=$(output_problem "$path") || die_usage "OUT $out: $path: $why"
  done
done
mkdir -p -- "$out" || die_usage "OUT: cannot create '$out'"
# shellcheck disable=SC2054  # the commas belong to --trace's value
opts=(--trace=cuda,nvtx,osrt --sample=none --cpuctxsw=none --capture-range=cudaProfilerApi --capture-range-end=stop)
for mode in $modes; do
  o=$out/sig_$mode
  remove_stale "$o".{log,json,nsys-rep,sqlite}
  setsid nsys profile "${opts[@]}" "--output=$o" "$TRAIN_BIN" --data "$data" --steps 2000 --report "$o.json" >"$o.log" 2>&1 &
  leader=$!
  for _ in $(seq 1 600); do grep -q "^\[step   1/" "$o.log" 2>/dev/null && break; sleep 0.05; done
  sleep 3
  before=$(grep -c "^\[step " "$o.log")
  app=$(pgrep -x train_resnet50 | head -1)
  t0=$(date +%s.%N)
  if [ "$mode" = app ]; then kill -INT "$app"; else kill -INT -- "-$leader"; fi
  until grep -q "^  report " "$o.log" 2>/dev/null || ! kill -0 "$app" 2>/dev/null; do sleep 0.02; done
  tr=$(date +%s.%N)
  echo "== $mode: report line $(awk "BEGIN{print $tr-$t0}") s after SIGINT; step lines at the signal $before, at the end $(grep -c "^\[step " "$o.log")"
  grep -n "received\|Capture range\|^summary" "$o.log"
  # the training process's own exit
  while kill -0 "$app" 2>/dev/null; do sleep 0.05; done
  t1=$(date +%s.%N)
  wait "$leader"; rc=$?
  t2=$(date +%s.%N)
  echo "== $mode: app exited $(awk "BEGIN{print $t1-$t0}") s after SIGINT; nsys exit $rc after $(awk "BEGIN{print $t2-$t0}") s"
  grep -v "\[1/1\]" "$o.log" | tail -25
  stat -c "%s bytes  %y  %n" "$o.nsys-rep" 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('report: interrupted', r.get('interrupted'), r.get('interrupt_signal'), 'capture', {k: v for k, v in r.get('capture',{}).items() if not isinstance(v, (list, dict))})" "$o.json" 2>&1
  if [ -f "$o.nsys-rep" ]; then
    nsys export --type=sqlite --force-overwrite=true "--output=$o.sqlite" "$o.nsys-rep" >/dev/null 2>&1
    python3 scripts/analyze.py "$o.sqlite" --out "${o}_a" --no-figures 2>&1 | tail -1
    grep -E "capture_boundary|unterminated" "${o}_a/summary.md" | head -3
    python3 -c "import json, sys; s=json.load(open(sys.argv[1])); print('unterminated', s['unterminated_ranges'], 'steps', s['steps'], 'checks', dict(s['checks']))" "${o}_a/summary.json"
    python3 - "$o.sqlite" <<'PY'
import sys; sys.path.insert(0, 'scripts'); from nsys_analysis.capture.export import load_export
ex = load_export(sys.argv[1])
w = [r for r in ex.ranges if r.name == 'capture_window'][0]
st = sorted(r for r in ex.ranges if r.name == 'torch_step') if False else sorted((r.start, r.end) for r in ex.ranges if r.name == 'torch_step')
cp = sorted(c.start for c in ex.memcpys if c.is_htod)
ks = sorted(k.start for k in ex.kernels)
rel = lambda t: round((t - w.start) / 1e6, 1)
print('window ms', rel(w.end), 'steps host span', rel(st[0][0]), rel(st[-1][1]))
print('h2d copies', len(cp), 'first/last', rel(cp[0]), rel(cp[-1]), 'kernels', len(ks), 'last kernel', rel(ks[-1]))
api = [a for a in ex.api_calls if a.name.startswith('cudaMemcpy')]
print('memcpy API calls in window', sum(1 for a in api if w.start <= a.start < w.end), 'last', rel(max(a.start for a in api)))
PY
  fi
done
exit 0
