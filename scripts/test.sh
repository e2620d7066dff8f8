#!/usr/bin/env bash
# Every test: the build with warnings as errors, the source checks, the whole suite (gpu and vm tests
# skip with a reason where there is none) beside the sanitizer builds, then ASan+UBSan, TSan and fuzz.
# Each phase's heading says the second it began, so every CI log shows where the time went.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# setup.sh below installs everything the checks need (python3-jsonschema for the SigMF schema
# checks among them), so a check that cannot run is a failure here, as in CI, not a skip.
export CI="${CI:-true}"
phase() { echo "== $* (at ${SECONDS} s)"; }

# Line tables only (-g1) in both builds: backtraces and sanitizer reports keep file:line, and the
# two builds, most of this script's time on a small machine, compile faster than with full -g.
scripts/setup.sh build -DSLUICE_WERROR=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"

# The source checks (seconds): every function over 60 lines says why at its top, every C++ and
# CUDA file is as scripts/format.sh leaves it, and docs/ARCHITECTURE.md's rooms, paths and names
# match the tree's includes and files. They fail, never skip, when their tool is missing.
phase "source checks"
scripts/check_functions.sh
scripts/format.sh --check
python3 scripts/check_architecture.py

# The sanitizer builds run beside the whole suite, at the lowest priority: most of the suite's
# time is spent waiting on sockets, processes and the VM, and the builds take that idle time.
# They are unity builds (each target's sources compiled as a few combined files): the headers are
# parsed once per batch rather than once per file, and the build above, not a unity one, keeps
# every file compiling on its own. ASan is built first; its tests start as soon as it is done,
# while the TSan build goes on beside them.
asan_flags=(-DSLUICE_WERROR=ON -DSLUICE_SANITIZE=address,undefined -DSLUICE_WITH_CUDA=OFF -DSLUICE_BUILD_BENCH=OFF
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_UNITY_BUILD=ON)
tsan_flags=(-DSLUICE_WERROR=ON -DSLUICE_SANITIZE=thread -DSLUICE_WITH_CUDA=OFF -DSLUICE_BUILD_BENCH=OFF
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_UNITY_BUILD=ON)
asan_built=build-asan/sluice-unit-tests.built
rm -f "$asan_built"
phase "sanitizer builds (beside the suite; log in build-sanitizers.log)"
(
  set -e
  cmake -S . -B build-asan -G Ninja "${asan_flags[@]}" >/dev/null
  nice -n 19 cmake --build build-asan -j "$jobs" --target sluice_unit_tests
  touch "$asan_built"
  cmake -S . -B build-tsan -G Ninja "${tsan_flags[@]}" >/dev/null
  nice -n 19 cmake --build build-tsan -j "$jobs" --target spsc_queue_test lifecycle_test receive_thread_test core_wait_test
) >build-sanitizers.log 2>&1 &
sanitizer_builds=$!
trap 'kill "$sanitizer_builds" 2>/dev/null || true' EXIT
sanitizer_builds_failed() {
  cat build-sanitizers.log
  echo "sanitizer builds failed" >&2
  exit 1
}

phase "all tests"
ctest --test-dir build -j "$jobs" --output-on-failure

# Bash reaps the chain when it ends, so a chain that failed before the marker stops the wait.
until [ -e "$asan_built" ] || ! kill -0 "$sanitizer_builds" 2>/dev/null; do sleep 1; done
if [ ! -e "$asan_built" ]; then
  wait "$sanitizer_builds" || true
  sanitizer_builds_failed
fi
phase "ASan + UBSan: unit tests"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -L unit -j "$jobs" --output-on-failure

wait "$sanitizer_builds" || sanitizer_builds_failed
trap - EXIT
phase "TSan: queue, lifecycle and udp receive thread tests"
TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan -R "^(SpscQueue|Lifecycle|ReceiveThread|ReceiveStandby|CoreWait)\." -j "$jobs" --output-on-failure

if [ -x scripts/fuzz.sh ]; then
  phase "fuzz (bounded)"
  scripts/fuzz.sh
fi
phase "done"
