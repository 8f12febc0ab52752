#!/usr/bin/env bash
# Runs the JPEG fuzzer for a bounded time on a fresh seed corpus of every JPEG kind.
# usage: run_fuzzer.sh FUZZER CORPUS_TOOL [SECONDS]   (CTest passes the built executables)
set -euo pipefail
fuzzer=$1
corpus_tool=$2
seconds=${3:-${FUZZ_SECONDS:-60}}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
"$corpus_tool" "$work/corpus"
# -rss_limit_mb guards against decompression bombs; -timeout flags any input slower than 10 s.
exec "$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$work/" "$work/corpus"
