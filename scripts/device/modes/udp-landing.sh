# shellcheck disable=SC2154,SC2034 # $pack, $out, $mode and status belong to run.sh, which sources this
# udp-landing: socket_bench's BM_ReceiveLanding at LANDING_RATES (bytes/s, default "1e9 3e9"):
# the receiving thread's CPU per GB receiving into hot buffers (the bare loop), then streaming
# each payload into a 128 MiB ring (the udp stage's copy), or with the kernel landing payloads
# straight in that ring; then VsBare (stage vs bare loop, medians of 5). Needs socket_bench and
# sluice-emulator packed.
landing_rows=()
for landing_rate in ${LANDING_RATES:-1e9 3e9}; do
  echo "===== socket_bench Landing at $landing_rate B/s" | tee -a "$out/bench.log"
  SLUICE_BENCH_LANDING_RATE=$landing_rate timeout 300 "$pack/bin/socket_bench" --benchmark_filter=Landing \
    > "$out/landing-$landing_rate.log" 2>&1 || status=1
  cat "$out/landing-$landing_rate.log" >> "$out/bench.log"
  landing_rows+=("$(python3 - "$out/landing-$landing_rate.log" "$landing_rate" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
get = lambda name: (re.search(name + r"=([0-9.]+)", text) or [None, "?"])[1]
print(f"{float(sys.argv[2]) / 1e9:>8.1f} {get('hot_rx_cpu_s_per_GB'):>10} {get('copy_rx_cpu_s_per_GB'):>10} "
      f"{get('land_rx_cpu_s_per_GB'):>10} {get('copy_vs_hot'):>8} {get('land_vs_hot'):>8}")
PY
)")
done
bench socket_bench --benchmark_filter=VsBare
echo "receiving thread CPU s/GB by where the bytes go (socket_bench BM_ReceiveLanding)"
printf '%8s %10s %10s %10s %8s %8s\n' "GB/s" "hot" "copy" "land" "copy/hot" "land/hot"
printf '%s\n' "${landing_rows[@]}"
