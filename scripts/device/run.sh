#!/usr/bin/env bash
# Runs on the lent GPU machine from the repository root, with .device/ carried. Modes:
#   bash .device/run.sh tests    every test binary (gpu-labelled ones run for real there; the
#                                others must pass or skip) and the demo pipeline landing in GPU memory
#   bash .device/run.sh bench    link (through GPU memory), lane and fft benchmarks on a quiet 16-core host
#   bash .device/run.sh socket   socket_bench: udp stage vs bare recvmmsg, and the 30 s paced no-loss run
# Several modes may be given; everything is logged into a few files under $OUT.
set -uo pipefail
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
export PATH="$PWD/.device/bin:$PATH"  # fio, packed by pack.sh, for recorder_bench
export SLUICE_BINARY="$PWD/.device/bin/sluice" SLUICE_EMULATOR="$PWD/.device/bin/sluice-emulator" SLUICE_SOURCE_DIR="$PWD"
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader \
  | tee "$out/gpu.txt"
nproc | tee -a "$out/gpu.txt"
status=0

bench() {  # bench NAME [args...]: 5 repetitions, medians to the log and the screen
  local name=$1
  shift
  echo "===== $name $*" | tee -a "$out/bench.log"
  timeout 300 ".device/bin/$name" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true "$@" \
    >> "$out/bench.log" 2>&1 || status=1
  grep -E '_median|ERROR' "$out/bench.log" | tail -4
}

for mode in "$@"; do
  case $mode in
    tests)
      for test in .device/bin/*_test; do
        name=$(basename "$test")
        echo "===== $name" >> "$out/tests.log"
        if "$test" >> "$out/tests.log" 2>&1; then
          echo "PASS $name ($(grep -c '^\[  SKIPPED \]' "$out/tests.log") skips so far)"
        else
          echo "FAIL $name"; status=1
        fi
      done
      grep -E '^\[       OK \] (GpuMemory|RecordGpu)' "$out/tests.log"
      grep -B2 -A12 'Failure' "$out/tests.log" | tail -40
      .device/bin/sluice run .device/configs/demo.yaml --duration 5s -q --report "$out/demo-report.json" \
        --plot "$out/demo-rates.svg" 2> "$out/demo.log" | tee "$out/demo-summary.txt" || status=1
      grep -E 'GPU|note' "$out/demo.log" | head -5
      ;;
    bench)
      bench link_bench
      bench lane_bench
      bench fft_bench
      ;;
    socket)
      bench socket_bench --benchmark_filter=VsBare
      echo "===== socket_bench paced 30 s" | tee -a "$out/bench.log"
      SLUICE_BENCH_PACED_SECONDS=30 timeout 200 .device/bin/socket_bench --benchmark_filter=Paced >> "$out/bench.log" 2>&1 \
        || status=1
      grep -A4 'Paced' "$out/bench.log" | tail -6
      ;;
    *) echo "unknown mode $mode"; status=2 ;;
  esac
done
exit $status
