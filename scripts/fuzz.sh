#!/usr/bin/env bash
# Builds the VITA-49 decoder fuzz target with clang + libFuzzer in its own build directory
# and runs it for a bounded time. Exits non-zero when the fuzzer finds a crash.
#   scripts/fuzz.sh [seconds=30] [build-dir=build-fuzz]
set -euo pipefail
seconds="${1:-30}"
build="${2:-build-fuzz}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cxx="${CXX_FUZZ:-$(command -v clang++ || command -v clang++-14)}"
cc="${CC_FUZZ:-$(command -v clang || command -v clang-14)}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_C_COMPILER="$cc" -DSLUICE_BUILD_FUZZ=ON -DSLUICE_BUILD_BENCH=OFF -DSLUICE_WITH_CUDA=OFF -DSLUICE_WITH_RDMA=OFF >/dev/null
ninja -C "$build" -j2 sluice_vita49_fuzz
corpus="$build/fuzz-corpus"
mkdir -p "$corpus"
# Seed: one valid packet as the emulator sends it (header, stream ID, class ID, timestamps, trailer).
printf '\x1c\x65\x00\x09\x12\x34\x56\x78\x00\x00\x12\xa2\x00\x01\x00\x02\x5f\x5e\x10\x00\x00\x00\x00\x01\x02\x03\x04\x05\x00\x01\xff\xfe\x40\x04\x00\x00' \
  >"$corpus/seed_packet"
"$build/tests/wire/sluice_vita49_fuzz" -max_total_time="$seconds" -max_len=70000 -print_final_stats=1 "$corpus"
