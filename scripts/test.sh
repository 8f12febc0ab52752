#!/usr/bin/env bash
# The README's test command: installs what is missing (apt), configures, builds and runs every
# test (the GoogleTest suites and the Python tests of scripts/, all through CTest).
#
#   scripts/test.sh                 Release build in build/, all CTest suites
#   BUILD_DIR=b scripts/test.sh     another build directory
#   SKIP_APT=1 scripts/test.sh      never call apt (without a package server, apt's failure is only
#                                   a note anyway: CMake names what is really missing)
#   APT_UNSAFE_IO=1 scripts/test.sh  dpkg unpacks without syncing each file: for a machine used once
#                                   (.ci/run sets it)
#   QUICK=1 scripts/test.sh         only the Release build's suite: no sanitizer or fuzzer builds
#   CTEST_JOBS=1 scripts/test.sh    the suites one at a time (default 2 at once; a suite that fails
#                                   beside another is run again alone, and named FLAKY when it
#                                   passes there)
#   FUZZ_SECONDS=300 scripts/test.sh  fuzz longer (default 60 s)
#
# The LibTorch is chosen as scripts/run.sh chooses it (scripts/lib/install_deps.sh): on a GPU
# machine with a CUDA PyTorch installed, its LibTorch, so the CUDA test cases run; a GPU machine with
# only a CPU LibTorch is an error (ALLOW_CPU_LIBTORCH=1 to test on the CPU anyway). First, the
# checks of the tree: every C++ file follows .clang-format, every shell script passes shellcheck,
# every Python file black, flake8 and mypy (scripts/dev/check_{format,shell,python}.sh), and after
# the build every unit clang-tidy (scripts/dev/check_tidy.sh) and, on a machine without a GPU, the
# units only a GPU build compiles and the GPU branches of the others, with the GPU build's switches
# (scripts/dev/check_gpu_units.py); each is skipped with a note where its tool (Debian 12's
# version; the CUDA toolkit) is missing.
# Besides the Release build (build/), whose suites run once and whose learning and numerics suites
# (label numerics) run again under every other ATen CPU capability, the first of those with oneDNN
# off, it builds (beside the Release suites, at the lowest priority) and runs, as CI does:
#   build-fuzz/  (clang, ASan + UBSan everywhere) the common/ and data_pipeline tests, the loader
#                stress test and lib/'s concurrent units (the stop request, the signals, the
#                watchdog); then the libFuzzer target on the JPEG decode + augment path,
#                FUZZ_SECONDS long, on a seed corpus of every JPEG kind
#   build-tsan/  (gcc) those of them whose code runs on several threads (label threads) under
#                ThreadSanitizer (suppressions: tests/support/sanitizers/tsan.supp)
# The Release tree is built by clang on a machine without a GPU where clang is installed (as CI
# builds it; CC and CXX choose another), else by the compiler CMake finds.
# LibTorch itself is not instrumented; the sanitizer trees build only what they test. It ends with
# the seconds each phase took and the list of FLAKY suites, if any.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
CTEST_JOBS=${CTEST_JOBS:-2}

log() { printf '\n== test.sh: %s\n' "$*"; }

# timed <what> <command...>: runs the command and keeps its wall time for the closing table, where
# CI's half-hour goes (apt, each build, each tree's suites).
TIMES=()
# Returns the command's status (under `if ! timed ...` too, where set -e is off).
timed() {
  local what=$1 start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  TIMES+=("$(printf '%6d s  %s' $((SECONDS - start)) "$what")")
  return "$rc"
}

# --- packages (Debian/Ubuntu), LibTorch -----------------------------------------------------------
source scripts/lib/install_deps.sh
select_libtorch
export WITH_TEST_DEPS=1
[ "${QUICK:-0}" != 1 ] && export WITH_FUZZ_DEPS=1
timed "apt (install_deps)" install_deps

# The Release tree's compiler: CC and CXX where set; else, on a machine without a GPU, clang where
# installed (the fuzzer's deps bring it), as CI builds it. clang compiles this tree in about two
# thirds of gcc's CPU time, and clang-tidy's record holds the keys of clang's compile commands. On
# a GPU machine, the compiler CMake finds, beside nvcc.
if [ -z "${CXX:-}" ] && ! gpu_visible && command -v clang++ >/dev/null; then
  export CC=clang CXX=clang++
fi
# The linker of every tree on such a machine: lld where installed (install_deps brings it with the
# test tools). It links a test executable in 0.4 s where GNU ld takes 2.0 s, and CI's three trees
# link 141 programs (docs/BENCHMARKS.md, issue 41, eighth round). The GPU build keeps the default,
# which nvcc's device links expect.
LINKER_ARGS=()
if ! gpu_visible && command -v ld.lld >/dev/null; then
  for kind in EXE SHARED MODULE; do LINKER_ARGS+=("-DCMAKE_${kind}_LINKER_FLAGS=-fuse-ld=lld"); done
fi

# The checks of the tree (scripts/dev/check_*.sh), all of them before failing: each names what it
# found, or says it skipped where its tool (the reference version, CI's) is missing.
run_checks() {
  local check failed=()
  for check in check_format check_shell check_python; do
    scripts/dev/$check.sh --if-available || failed+=("scripts/dev/$check.sh")
  done
  if [ ${#failed[@]} -gt 0 ]; then
    log "the checks of the tree failed: ${failed[*]}"
    exit 1
  fi
}
log "checks of the tree: C++ format, shell scripts, Python"
timed "checks of the tree" run_checks

# --- configure, build, test ------------------------------------------------------------------------
configure_and_build() {  # <build dir> [extra cmake args...]
  local dir=$1
  shift
  log "configure $dir $*"
  cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
    -DWORKLOAD_BUILD_TESTS=ON "${TORCH_CMAKE_ARGS[@]}" "${LINKER_ARGS[@]}" "$@"
  read_build_facts "$dir"
  log "$(describe_build)"
  # On a GPU machine the CUDA test cases must run: refuse a CPU LibTorch there.
  if gpu_visible && [ "$BUILD_TORCH_CUDA" != ON ] && [ "${ALLOW_CPU_LIBTORCH:-0}" != 1 ]; then
    cpu_libtorch_on_gpu_message
    exit 1
  fi
  log "build $dir"
  timed "build $dir" cmake --build "$dir" -j "$JOBS"
}

test_tree() {  # <build dir>
  local dir=$1
  log "test $dir"
  timed "suites $dir" run_suites "$dir" -LE numerics
  # What training did must hold on every CPU kernel path LibTorch can take (docs/testing.md, "The
  # suites hold on any machine"): the learning and numerics suites again under each ATen capability
  # this CPU runs but the one the main pass took, and once with oneDNN's convolutions off. oneDNN
  # picks its own instruction set whatever ATEN_CPU_CAPABILITY says, so the first of those passes
  # also turns it off: each capability and each convolution path runs once, in two passes where
  # there were four (the main pass is the avx2 one of LibTorch 1.13 on an AVX-512 CPU).
  local main_cap cap onednn=0 what
  main_cap=$(capability_of_main_pass "$dir")
  log "the main pass ran ATen CPU capability ${main_cap:-(not known: every capability again)}"
  for cap in $(cpu_capabilities); do
    [ "$cap" = "$main_cap" ] && continue
    what="ATEN_CPU_CAPABILITY=$cap"
    [ "$onednn" = 0 ] && what+=", oneDNN off (LibTorch's native convolutions)"
    log "numerics suites, $what"
    ATEN_CPU_CAPABILITY=$cap WORKLOAD_TEST_ONEDNN=$onednn timed "numerics suites, $what" \
      run_suites "$dir" -L numerics
    onednn=1
  done
  if [ "$onednn" = 0 ]; then  # the CPU has no capability but the main pass's
    log "numerics suites, oneDNN off (LibTorch's native convolutions)"
    WORKLOAD_TEST_ONEDNN=0 timed "numerics suites, oneDNN off" run_suites "$dir" -L numerics
  fi
}

# capability_of_main_pass <build dir>: the ATen CPU capability the main pass's suites ran with (the
# environment's ATEN_CPU_CAPABILITY, or LibTorch's own choice), as a numerics suite's first line
# says it ("[ kernels  ] ATen CPU capability avx2 ..."); empty when no suite says it.
capability_of_main_pass() {
  local suite
  suite=$(ctest --test-dir "$1" -L numerics --show-only=json-v1 2>/dev/null |
    python3 -c 'import json, sys; t = json.load(sys.stdin)["tests"]; print(t[0]["command"][0] if t else "")' \
      2>/dev/null) || return 0
  [ -n "$suite" ] || return 0
  "$suite" --gtest_list_tests 2>/dev/null |
    sed -n 's/^\[ kernels  \] ATen CPU capability \([a-z0-9_]*\) .*/\1/p' | head -n 1
}

# The ATen CPU capabilities (ATEN_CPU_CAPABILITY) this CPU can run: LibTorch takes the variable's
# word without asking the CPU, so an instruction set it lacks would end in SIGILL.
cpu_capabilities() {
  local flags
  flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
  echo default
  [[ $flags == *" avx2 "* && $flags == *" fma "* ]] && echo avx2
  [[ $flags == *" avx512f "* && $flags == *" avx512bw "* && $flags == *" avx512vl "* &&
     $flags == *" avx512dq "* ]] && echo avx512
  return 0
}

# run_suites <build dir> [ctest args...]: the suites, CTEST_JOBS at a time (CTest counts each
# suite's PROCESSORS against -j, so they never need more cores than that). A suite that fails beside
# others runs again alone: passing there makes it FLAKY (said now and listed at the end, a cause to
# fix; a sanitizer tree's suite named with its tree), failing there fails test.sh.
FLAKY=()
run_suites() {
  local dir=$1
  shift
  # shellcheck disable=SC2086  # CTEST_ARGS is a list of ctest flags
  ctest --test-dir "$dir" --output-on-failure -j "$CTEST_JOBS" ${CTEST_ARGS:-} "$@" && return 0
  local failed_log="$dir/Testing/Temporary/LastTestsFailed.log" name failed=() still=()
  [ -f "$failed_log" ] || { log "ctest failed before running the suites"; exit 1; }
  mapfile -t failed < <(cut -d: -f2- "$failed_log")
  log "the failed suites again, one at a time: ${failed[*]}"
  for name in "${failed[@]}"; do
    local what=$name
    [ "$dir" = "$BUILD_DIR" ] || what="$name in $dir"
    # shellcheck disable=SC2086
    if ctest --test-dir "$dir" --output-on-failure ${CTEST_ARGS:-} "$@" -R "^${name}\$"; then
      echo "FLAKY: $what (failed beside others, passed alone)"
      FLAKY+=("$what")
    else
      still+=("$name")
    fi
  done
  if [ ${#still[@]} -gt 0 ]; then
    log "failed, beside others and alone: ${still[*]}"
    exit 1
  fi
}

# The sanitizer and fuzzer trees, built at the lowest priority while the Release tree's suites run:
# those mostly wait (on timeouts, sockets, child processes), and nice 19 leaves them every cycle
# they ask for, so the builds fill the idle cores instead of adding minutes to CI.
build_checked_trees() {
  local start=$SECONDS
  renice -n 19 "$BASHPID" >/dev/null
  # The fuzzer's tree compiles everything with ASan + UBSan already, so it builds the sanitizer
  # suites too: their ASan + UBSan pass, where a tree of its own (gcc) compiled the same units again.
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "${BUILD_DIR}-fuzz" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWORKLOAD_SANITIZE=fuzzer "${TORCH_CMAKE_ARGS[@]}" \
    "${LINKER_ARGS[@]}" &&
    cmake --build "${BUILD_DIR}-fuzz" -j "$JOBS" --target sanitize_tests fuzz_tests &&
    CC=gcc CXX=g++ cmake -S "$ROOT" -B "${BUILD_DIR}-tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DWORKLOAD_SANITIZE=thread "${TORCH_CMAKE_ARGS[@]}" "${LINKER_ARGS[@]}" &&
    cmake --build "${BUILD_DIR}-tsan" -j "$JOBS" --target tsan_tests || return 1
  echo "test.sh: the sanitizer and fuzzer trees built in $((SECONDS - start)) s (nice 19)"
}

configure_and_build "$BUILD_DIR" -DWORKLOAD_WERROR=ON
# clang-tidy over the units this build compiled (scripts/dev/check_tidy.sh): the units that
# scripts/dev/clang_tidy_clean.txt records clean with the same inputs are not checked again, so a
# change costs about 20 s of a core per unit it touches rather than the tree's 20 minutes.
log "clang-tidy over $BUILD_DIR's units"
if ! timed "clang-tidy (units changed since the record)" scripts/dev/check_tidy.sh --if-available \
  --record scripts/dev/clang_tidy_clean.txt "$BUILD_DIR"; then
  log "clang-tidy found the above (fix, or silence on the line with a reason: .clang-tidy)"
  exit 1
fi
# The units only a GPU build compiles, and the units whose GPU branches (#if WORKLOAD_TORCH_CUDA, the
# WORKLOAD_HAVE_* switches) this build left out, with the GPU build's switches against the CUDA
# toolkit's headers (scripts/dev/check_gpu_units.py): a change that breaks them fails here, not on
# the next GPU machine. Those scripts/dev/gpu_units_clean.txt records with the same inputs are not
# compiled again.
log "the GPU-only units and GPU branches, compiled with the GPU build's switches"
if ! timed "GPU-only units and branches (changed since the record)" \
  python3 scripts/dev/check_gpu_units.py --if-available --record scripts/dev/gpu_units_clean.txt \
  "$BUILD_DIR"; then
  log "a unit does not compile with the GPU build's switches (above): a GPU build would fail too"
  exit 1
fi
if [ "${QUICK:-0}" != 1 ]; then
  if ! command -v clang++ >/dev/null; then
    echo "test.sh: clang++ not found: the fuzzer build cannot run (apt install clang libclang-rt-dev)" >&2
    exit 1
  fi
  checked_log="${BUILD_DIR}-checked-trees.log"
  log "the sanitizer and fuzzer trees build beside the suites (nice 19; log: $checked_log)"
  build_checked_trees > "$checked_log" 2>&1 &
  checked_pid=$!
  trap 'kill "$checked_pid" 2>/dev/null || true' EXIT
fi
test_tree "$BUILD_DIR"

if [ "${QUICK:-0}" != 1 ]; then
  log "waiting for the sanitizer and fuzzer trees"
  if ! timed "sanitizer and fuzzer builds, left after the suites" wait "$checked_pid"; then
    tail -n 60 "$checked_log"
    log "the sanitizer or fuzzer build failed (the whole log: $checked_log)"
    exit 1
  fi
  tail -n 1 "$checked_log"
  log "sanitizer suites under ASan + UBSan in ${BUILD_DIR}-fuzz"
  timed "suites ${BUILD_DIR}-fuzz (ASan + UBSan)" run_suites "${BUILD_DIR}-fuzz" -L sanitize
  # The fuzzer is one process on one core for FUZZ_SECONDS: it runs beside the TSan suites instead
  # of after them. Its output follows theirs.
  fuzz_log="${BUILD_DIR}-fuzz.log"
  log "fuzzing in ${BUILD_DIR}-fuzz (${FUZZ_SECONDS:-60} s) beside the TSan suites (log: $fuzz_log)"
  FUZZ_SECONDS=${FUZZ_SECONDS:-60} \
    ctest --test-dir "${BUILD_DIR}-fuzz" --output-on-failure -L fuzz > "$fuzz_log" 2>&1 &
  fuzz_pid=$!
  trap 'kill "$fuzz_pid" 2>/dev/null || true' EXIT
  log "sanitizer suites under TSan in ${BUILD_DIR}-tsan"
  timed "suites ${BUILD_DIR}-tsan" run_suites "${BUILD_DIR}-tsan" -L threads
  log "the fuzzer's run"
  fuzz_rc=0
  timed "fuzz ${BUILD_DIR}-fuzz, left after the TSan suites" wait "$fuzz_pid" || fuzz_rc=$?
  cat "$fuzz_log"
  if [ "$fuzz_rc" != 0 ]; then
    log "the fuzzer failed (rc $fuzz_rc; the input it found is named above)"
    exit 1
  fi
fi
log "where the time went (total $SECONDS s)"
printf '%s\n' "${TIMES[@]}"
if [ ${#FLAKY[@]} -gt 0 ]; then
  log "all tests passed, but these failed beside others and passed alone:"
  printf 'FLAKY: %s (failed beside others, passed alone)\n' "${FLAKY[@]}"
else
  log "all tests passed"
fi
