#!/usr/bin/env bash
# Runs on the lent GPU machine from the repository root, with .device/ carried:
# the gpu-labelled tests, every test binary (which must pass or skip there too), and the
# demo pipeline with its chunks landing in GPU memory. Logs go to $OUT.
set -uo pipefail
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
export SLUICE_BINARY="$PWD/.device/bin/sluice" SLUICE_SOURCE_DIR="$PWD"
status=0
for test in .device/bin/*_test; do
  name=$(basename "$test")
  if "$test" --gtest_brief=1 > "$out/$name.log" 2>&1; then
    echo "PASS $name $(grep -c '\[  SKIPPED \]' "$out/$name.log") skipped"
  else
    echo "FAIL $name"; tail -30 "$out/$name.log"; status=1
  fi
done
.device/bin/sluice run .device/configs/demo.yaml --duration 5s -q --report "$out/demo-report.json" \
  --plot "$out/demo-rates.svg" 2> "$out/demo.log" | tee "$out/demo-summary.txt" || status=1
grep -E 'GPU|note' "$out/demo.log" | head -5
exit $status
