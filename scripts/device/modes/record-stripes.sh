# Four volumes: fio with one job per volume, all at once, against recorder_bench's
# BM_StripedWriteVsFio (one lane striped over the four, depth 8 a volume, 4 MiB blocks,
# O_DIRECT, huge pages on both sides), in the same run.
# shellcheck shell=bash disable=SC1091
source "$pack/modes/record.sh"
record_make_volumes 4
echo 64 > /proc/sys/vm/nr_hugepages  # fio --iomem=mmaphuge
dirs=$(IFS=:; echo "${record_mounts[*]}")
SLUICE_BENCH_DIRS=$dirs SLUICE_BENCH_BYTES=${RECORD_STRIPE_BYTES:-4GiB} timeout 500 "$pack/bin/recorder_bench" \
  --benchmark_filter=Striped --benchmark_repetitions=3 --benchmark_out="$out/record-stripes.json" \
  --benchmark_out_format=json >> "$out/record-bench.log" 2>&1 || status=1
python3 - "$out/record-stripes.json" <<'PY' >> "$record_summary" || status=1
import json, sys
median = next(b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("aggregate_name") == "median")
print(f"{'stripes':<10} {'recorder, one lane over 4 volumes vs fio 4 jobs, MB/s':<58} {median['recorder_MBps']:14.0f} "
      f"{'fio ' + str(round(median['fio_MBps'])):>14} {median['ratio']:7.2f}")
PY
record_table
