#!/usr/bin/env bash
# Runs on the lent GPU machine from the repository root, with .device/ carried: every test
# binary (gpu-labelled ones run for real there; others must pass or skip), the demo pipeline
# with its chunks landing in GPU memory, and with `bench` the CPU-side benchmarks on a quiet
# 16-core host. Everything is logged into a few files under $OUT.
#   bash .device/run.sh [bench]
set -uo pipefail
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
export SLUICE_BINARY="$PWD/.device/bin/sluice" SLUICE_EMULATOR="$PWD/.device/bin/sluice-emulator" SLUICE_SOURCE_DIR="$PWD"
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
status=0
for test in .device/bin/*_test; do
  name=$(basename "$test")
  echo "===== $name" >> "$out/tests.log"
  if "$test" >> "$out/tests.log" 2>&1; then
    echo "PASS $name ($(grep -c '^\[  SKIPPED \]' "$out/tests.log") skips so far)"
  else
    echo "FAIL $name"; status=1
  fi
done
grep -B2 -A12 'Failure\|SKIPPED \]' "$out/tests.log" | tail -60
.device/bin/sluice run .device/configs/demo.yaml --duration 5s -q --report "$out/demo-report.json" \
  --plot "$out/demo-rates.svg" 2> "$out/demo.log" | tee "$out/demo-summary.txt" || status=1
grep -E 'GPU|note' "$out/demo.log" | head -5
if [ "${1:-}" = bench ]; then
  nproc
  for bench in lane_bench fft_bench socket_bench; do
    echo "===== $bench" | tee -a "$out/bench.log"
    timeout 200 ".device/bin/$bench" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
      >> "$out/bench.log" 2>&1
    grep -E '_median' "$out/bench.log" | tail -8
  done
fi
exit $status
