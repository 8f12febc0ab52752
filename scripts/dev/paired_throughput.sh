#!/usr/bin/env bash
# Paired throughput of this tree's train_resnet50 against another source tree's (an earlier commit,
# say), in one session on one GPU: the GPU-bound ceiling (--synthetic) and the loader-fed run
# (defaults), alternating which binary goes first each round, without nsys. For refactors that must
# not change speed: read the new/old ratios, not the absolute figures.
#
# usage: scripts/dev/paired_throughput.sh --old-tree DIR [--data DIR] [--rounds N] [--steps N]
#                                     [--out DIR] [-- EXTRA TRAIN_RESNET50 FLAGS]
#
#   --old-tree DIR  the other source tree, e.g. made with
#                   git archive 9e9c2bd | (mkdir -p /tmp/old && tar -x -C /tmp/old)
#                   its train_resnet50 is built in DIR/build-paired with the same CMake environment
#   --data DIR      Food-101 root (default data/synthetic, as scripts/run.sh writes it)
#   --rounds N      rounds of (ceiling, loader-fed) per binary (default 2)
#   --steps N       captured steps per run, after 3 warm-up (default 48)
#   --out DIR       run reports and logs (default out/paired)
#
# This tree's binary is build/bin/train_resnet50 (BUILD_DIR to change). The logs in --out are checked
# before anything is built (a directory, FIFO or socket where a log goes is a usage error; symlinks are
# followed). Exit status: 0 when every run succeeded, 1 otherwise (or the old tree did not build), 2 for
# usage errors (a flag without its value, a bad --old-tree, --rounds or --steps, an --out that cannot be
# written, this tree's binary or python3 missing).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
# shellcheck source=scripts/lib/find_python.sh
source scripts/lib/find_python.sh
# shellcheck source=scripts/lib/output_files.sh
source scripts/lib/output_files.sh

usage() { sed -n '7,17s/^# \{0,1\}//p' "$0"; }
die_usage() { echo "paired_throughput.sh: error: $1" >&2; exit 2; }
old_tree="" data=data/synthetic rounds=2 steps=48 out=out/paired extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --old-tree | --data | --rounds | --steps | --out)
      # A flag without its value once looped forever here (shift 2 with one argument left shifts none).
      [ $# -ge 2 ] || die_usage "$1: expected a value"
      case "$1" in
        --old-tree) old_tree=$2 ;;
        --data) data=$2 ;;
        --rounds) rounds=$2 ;;
        --steps) steps=$2 ;;
        --out) out=$2 ;;
      esac
      shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "paired_throughput.sh: error: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if [ -z "$old_tree" ] || [ ! -f "$old_tree/CMakeLists.txt" ]; then
  die_usage "--old-tree: expected a source tree, got '$old_tree'"
fi
[[ $rounds =~ ^[1-9][0-9]{0,5}$ && $steps =~ ^[1-9][0-9]{0,8}$ ]] ||
  { echo "paired_throughput.sh: error: --rounds and --steps: expected positive integers" >&2; exit 2; }
[ -n "$out" ] || die_usage "--out: expected a value, got ''"
logs=("$out/old_build.log")
for ((round = 1; round <= rounds; round++)); do
  for name in {new,old}_{ceiling,loader}_$round; do logs+=("$out/$name.log" "$out/$name.json"); done
done
for path in "${logs[@]}"; do
  why=$(output_problem "$path") || die_usage "--out $out: $path: $why"
done
new_bin=${BUILD_DIR:-build}/bin/train_resnet50
[ -x "$new_bin" ] || { echo "paired_throughput.sh: error: $new_bin not built (scripts/run.sh builds it)" >&2; exit 2; }
py=$(find_python json) || { echo "paired_throughput.sh: error: no python3" >&2; exit 2; }
mkdir -p -- "$out" || die_usage "--out: cannot create '$out'"

echo "paired_throughput.sh: building $old_tree's train_resnet50 (log: $out/old_build.log)"
if ! { cmake -S "$old_tree" -B "$old_tree/build-paired" -G Ninja -DCMAKE_BUILD_TYPE=Release \
         -DWORKLOAD_BUILD_TESTS=OFF && cmake --build "$old_tree/build-paired" --target train_resnet50; } \
       > "$out/old_build.log" 2>&1; then
  tail -n 20 "$out/old_build.log" >&2
  echo "paired_throughput.sh: error: the old tree did not build" >&2
  exit 1
fi
old_bin=$old_tree/build-paired/bin/train_resnet50

failed=0
for ((round = 1; round <= rounds; round++)); do
  for kind in ceiling loader; do
    flags=(--data "$data" --warmup 3 --steps "$steps" --quiet "${extra[@]}")
    [ "$kind" = ceiling ] && flags+=(--synthetic)
    order=(new old)
    ((round % 2 == 0)) && order=(old new)
    for who in "${order[@]}"; do
      bin=$new_bin
      [ "$who" = old ] && bin=$old_bin
      name="${who}_${kind}_$round"
      if ! "$bin" "${flags[@]}" --report "$out/$name.json" > "$out/$name.log" 2>&1; then
        echo "paired_throughput.sh: $name failed: $(tail -n 1 "$out/$name.log")" >&2
        failed=1
      fi
    done
  done
done

"$py" - "$out" "$rounds" <<'PY'
import json, os, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def ips(name):
    path = os.path.join(out, name + ".json")
    return json.load(open(path))["capture"]["images_per_s"] if os.path.exists(path) else None
print("%-8s %5s %10s %10s %8s" % ("run", "round", "old img/s", "new img/s", "new/old"))
for kind in ("ceiling", "loader"):
    for r in range(1, rounds + 1):
        o, n = ips("old_%s_%d" % (kind, r)), ips("new_%s_%d" % (kind, r))
        ratio = "%.4f" % (n / o) if o and n else "-"
        print("%-8s %5d %10s %10s %8s" % (kind, r, "%.1f" % o if o else "-", "%.1f" % n if n else "-", ratio))
PY
exit "$failed"
