#!/usr/bin/env bash
# The README's main command: installs what is missing, builds against a CUDA LibTorch when there is
# one (an installed PyTorch's, when none is configured), makes a synthetic Food-101 when no --data
# is given, and runs train_resnet50 with the article's settings on the GPU, or a short CPU-sized run
# on a machine without one. Extra arguments pass through to train_resnet50 (later flags win, so
# `scripts/run.sh --steps 64` overrides the default).
#
#   scripts/run.sh                         synthetic data, article settings (GPU) or a short CPU run
#   scripts/run.sh --data ~/datasets       the real Food-101 (the directory holding food-101/)
#   DATA_DIR=/fast/disk scripts/run.sh     where the synthetic set goes (default: data/synthetic)
#   SYNTH_PER_CLASS=200 scripts/run.sh     synthetic images per class (GPU default 160: 12,120 train)
#   Torch_DIR=... / CMAKE_PREFIX_PATH=...  a LibTorch of your choice (see scripts/lib/install_deps.sh)
#
# It stops, saying how to fix it, when a GPU is visible but the only LibTorch found has no CUDA
# (unless --device cpu is given).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

source scripts/lib/install_deps.sh
select_libtorch
install_deps

echo "run.sh: configuring $BUILD_DIR"
mkdir -p "$BUILD_DIR"
if ! cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${TORCH_CMAKE_ARGS[@]}" \
     > "$BUILD_DIR/configure.log" 2>&1; then
  tail -n 30 "$BUILD_DIR/configure.log" >&2
  echo "run.sh: error: CMake could not configure the build (log: $BUILD_DIR/configure.log)" >&2
  exit 1
fi
read_build_facts "$BUILD_DIR"
echo "run.sh: $(describe_build)"

args=("$@")
have_data=0
cpu_asked=0
for a in "${args[@]}"; do
  case "$a" in
    --data|--data=*|--synthetic|--synthetic=true) have_data=1 ;;
    --device=cpu) cpu_asked=1 ;;
  esac
done
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  [ "${args[i]}" = --device ] && [ "${args[i + 1]}" = cpu ] && cpu_asked=1
done
if gpu_visible && [ "$BUILD_TORCH_CUDA" != ON ] && [ "$cpu_asked" = 0 ] &&
   [ "${ALLOW_CPU_LIBTORCH:-0}" != 1 ]; then
  echo "run.sh: error: $(describe_build)" >&2
  cpu_libtorch_on_gpu_message
  exit 1
fi

cmake --build "$BUILD_DIR" -j "$(nproc 2>/dev/null || echo 2)" --target train_resnet50 food101_synth
BIN="$BUILD_DIR/bin"

gpu=0
"$BIN/train_resnet50" --version | grep -q "CUDA device: yes" && gpu=1
if [ "$gpu" = 0 ] && [ "$BUILD_TORCH_CUDA" = ON ] && [ "$cpu_asked" = 0 ]; then
  echo "run.sh: note: this LibTorch has CUDA but sees no GPU (driver, CUDA_VISIBLE_DEVICES?)" >&2
fi

if [ "$have_data" = 0 ]; then
  DATA_DIR=${DATA_DIR:-data/synthetic}
  if [ -n "${SYNTH_PER_CLASS+x}" ] && ! [[ "$SYNTH_PER_CLASS" =~ ^[1-9][0-9]{0,5}$ ]]; then
    echo "run.sh: error: SYNTH_PER_CLASS=$SYNTH_PER_CLASS: expected images per class, 1 to 999999" >&2
    exit 2
  fi
  per_class=${SYNTH_PER_CLASS:-$([ "$gpu" = 1 ] && echo 160 || echo 12)}
  if [ ! -f "$DATA_DIR/food-101/meta/train.txt" ]; then
    echo "run.sh: writing a synthetic Food-101 ($per_class images per class) to $DATA_DIR"
    "$BIN/food101_synth" --out "$DATA_DIR" --per-class "$per_class"
  elif [ -n "${SYNTH_PER_CLASS+x}" ]; then
    echo "run.sh: note: $DATA_DIR/food-101 exists and is used as it is; SYNTH_PER_CLASS applies to" \
      "a new set only (delete $DATA_DIR/food-101, or give another DATA_DIR)" >&2
  fi
  args=(--data "$DATA_DIR" "${args[@]}")
fi

if [ "$gpu" = 1 ]; then
  # The article's settings are train_resnet50's defaults: batch 128, 3 + 8 steps, 8 workers, ...
  exec "$BIN/train_resnet50" "${args[@]}"
fi
echo "run.sh: no CUDA device for this build: a short CPU run (batch 8, 112 px, 1 + 3 steps, unless" \
  "your flags give others)"
exec "$BIN/train_resnet50" --device cpu --batch-size 8 --image-size 112 --warmup 1 --steps 3 \
  --intra-op-threads "$(nproc 2>/dev/null || echo 1)" \
  --workers 2 "${args[@]}"
