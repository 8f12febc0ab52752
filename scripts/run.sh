#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, makes a synthetic Food-101 when no
# --data is given, and runs train_resnet50 with the article's settings on a GPU, or a short
# CPU-sized run when there is none. Extra arguments pass through to train_resnet50 (later flags
# win, so `scripts/run.sh --steps 64` overrides the default).
#
#   scripts/run.sh                         synthetic data, article settings (GPU) or a short CPU run
#   scripts/run.sh --data ~/datasets       the real Food-101 (the directory holding food-101/)
#   DATA_DIR=/fast/disk scripts/run.sh     where the synthetic set goes (default: data/synthetic)
#   SYNTH_PER_CLASS=200 scripts/run.sh     synthetic images per class (GPU default 160: 12,120 train)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

source scripts/install_deps.sh
install_deps

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc 2>/dev/null || echo 2)" --target train_resnet50 food101_synth
BIN="$BUILD_DIR/bin"

gpu=0
"$BIN/train_resnet50" --version | grep -q "CUDA device: yes" && gpu=1

args=("$@")
have_data=0
for a in "${args[@]}"; do
  case "$a" in --data|--data=*|--synthetic|--synthetic=true) have_data=1 ;; esac
done
if [ "$have_data" = 0 ]; then
  DATA_DIR=${DATA_DIR:-data/synthetic}
  per_class=${SYNTH_PER_CLASS:-$([ "$gpu" = 1 ] && echo 160 || echo 12)}
  if [ ! -f "$DATA_DIR/food-101/meta/train.txt" ]; then
    echo "run.sh: writing a synthetic Food-101 ($per_class images per class) to $DATA_DIR"
    "$BIN/food101_synth" --out "$DATA_DIR" --per-class "$per_class"
  fi
  args=(--data "$DATA_DIR" "${args[@]}")
fi

if [ "$gpu" = 1 ]; then
  # The article's settings are train_resnet50's defaults: batch 128, 3 + 8 steps, 8 workers, ...
  exec "$BIN/train_resnet50" "${args[@]}"
fi
echo "run.sh: no CUDA device for this build: a short CPU run (batch 8, 112 px, 1 + 3 steps)"
exec "$BIN/train_resnet50" --device cpu --batch-size 8 --image-size 112 --warmup 1 --steps 3 \
  --intra-op-threads "$(nproc 2>/dev/null || echo 1)" \
  --workers 2 "${args[@]}"
