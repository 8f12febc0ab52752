#!/usr/bin/env bash
# Runs the JPEG fuzzer for a bounded time on a fresh seed corpus of every JPEG kind. An input that
# fails is kept in the current directory (CTest's: the build's tests/data_pipeline/), named on stderr.
# usage: run_fuzzer.sh FUZZER CORPUS_TOOL [SECONDS]   (CTest passes the built executables)
set -euo pipefail
fuzzer=$1
corpus_tool=$2
seconds=${3:-${FUZZ_SECONDS:-60}}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
"$corpus_tool" "$work/corpus"
# The memory limits follow from the decoder's caps (data_pipeline/jpeg_decoder.cpp): one pixel
# buffer of at most 2^27 pixels x 4 bytes (512 MiB) and libjpeg's buffers up to 768 MiB. No single
# allocation may pass 1 GiB (-malloc_limit_mb: a header that escapes the caps), and the process
# not 3 GiB (-rss_limit_mb: the caps' 1.25 GiB at once, on top of the ~0.8 GiB ASan and the corpus
# hold). -timeout flags any input slower than 10 s.
rc=0
"$fuzzer" -max_total_time="$seconds" -rss_limit_mb=3072 -malloc_limit_mb=1024 -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" || rc=$?
for found in "$work"/crash-* "$work"/oom-* "$work"/timeout-* "$work"/leak-*; do
  [ -e "$found" ] || continue
  cp "$found" .
  echo "run_fuzzer.sh: the failing input is kept as $PWD/$(basename "$found")" >&2
done
exit "$rc"
