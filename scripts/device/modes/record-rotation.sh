# A recording that rotates every 4 GiB over 5 files (4 rotations), 16 MiB chunks, against the
# same bytes in one file: late_early is the last file's rate over the first's (goal >= 0.95).
# shellcheck shell=bash disable=SC1091
source "$pack/modes/record.sh"
record_make_volumes 1 "${RECORD_ROTATION_VOLUME:-44G}"
SLUICE_BENCH_DIR=${record_mounts[0]} SLUICE_BENCH_ROTATIONS=5 SLUICE_BENCH_FILE_BYTES=${RECORD_ROTATE:-4GiB} \
  SLUICE_BENCH_CHUNK=16MiB timeout 500 "$pack/bin/rotation_bench" --benchmark_out="$out/record-rotation.json" \
  --benchmark_out_format=json >> "$out/record-bench.log" 2>&1 || status=1
python3 - "$out/record-rotation.json" <<'PY' >> "$record_summary" || status=1
import json, sys
b = json.load(open(sys.argv[1]))["benchmarks"][0]
print(f"{'rotation':<10} {'rotating every 4 GiB, 5 files: MB/s (ratio: last/first file)':<58} {b['rotating_MBps']:14.0f} "
      f"{'1 file ' + str(round(b['single_MBps'])):>14} {b['late_early']:7.2f}")
PY
record_table
