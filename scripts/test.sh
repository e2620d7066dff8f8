#!/usr/bin/env bash
# Every test: set up, build with warnings as errors, run the sanitizer builds (ASan+UBSan on
# the unit tests, TSan on the queue and lifecycle tests), a bounded fuzz run, then the whole
# suite (unit, e2e; gpu and vm tests skip with a reason where there is no GPU or VM).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# setup.sh below installs everything the checks need (python3-jsonschema for the SigMF schema
# checks among them), so a check that cannot run is a failure here, as in CI, not a skip.
export CI="${CI:-true}"

# Line tables only (-g1) in both builds: backtraces and sanitizer reports keep file:line, and the
# two builds, most of this script's time on a small machine, compile faster than with full -g.
scripts/setup.sh build -DSLUICE_WERROR=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"

echo "== ASan + UBSan: unit tests"
cmake -S . -B build-asan -G Ninja -DSLUICE_WERROR=ON -DSLUICE_SANITIZE=address,undefined \
  -DSLUICE_WITH_CUDA=OFF -DSLUICE_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 >/dev/null
cmake --build build-asan -j "$jobs" --target sluice_unit_tests
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -L unit -j "$jobs" --output-on-failure

echo "== TSan: queue and lifecycle tests"
cmake -S . -B build-tsan -G Ninja -DSLUICE_WERROR=ON -DSLUICE_SANITIZE=thread \
  -DSLUICE_WITH_CUDA=OFF -DSLUICE_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-tsan -j "$jobs" --target spsc_queue_test lifecycle_test
TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan -R "^(SpscQueue|Lifecycle)\." -j "$jobs" --output-on-failure

if [ -x scripts/fuzz.sh ]; then
  echo "== fuzz (bounded)"
  scripts/fuzz.sh
fi

echo "== all tests"
ctest --test-dir build -j "$jobs" --output-on-failure
