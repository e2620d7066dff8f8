# shellcheck disable=SC2154,SC2034 # $pack, $out, $mode and status belong to run.sh, which sources this
# udp-landing: at each of LANDING_RATES (bytes/s, default "4e9 5.5e9"), the udp stage's CPU time
# per byte against the bare recvmmsg+GRO loop's at that same pace, counted on the receive core and
# on the receiving thread alone (socket_bench VsBare, 8 KiB datagrams, 3 repetitions of 3
# alternating rounds, medians; goal <= 1.2x), then socket_bench's BM_ReceiveLanding: the receiving
# thread's CPU per GB receiving into hot buffers (the bare loop), copying each payload into a
# 128 MiB ring (the stage's path), the kernel landing payloads in that ring, and landing plus the
# byte swap in place, and (ring, ring_read) the kernel's copy cycling through the receive thread's
# ring of batches, alone and with the split's placing core reading each batch. VsBare also runs
# the split (the udp stage with receive_thread: true, its receive thread on the receive core, its
# placing thread on core 4): its receive core's and receive thread's CPU per byte against the bare
# loop's (goal <= 1.2x), its placing thread's CPU per byte beside the inline stage thread's, both
# receiving threads' sleeps (wake-ups) per MB, and the split against the bare loop beside a reader
# on the placing core (BareReader: the same threads on the same cores, less the ring's handover).
# LANDING_RECEIVE_BATCHES sets the split's receive_batches and the ring ways' batches.
# Needs socket_bench and sluice-emulator packed.
landing_rows=()
vs_bare_rows=()
split_rows=()
for landing_rate in ${LANDING_RATES:-4e9 5.5e9}; do
  echo "===== socket_bench VsBare/8192 paced at $landing_rate B/s" | tee -a "$out/bench.log"
  SLUICE_BENCH_RECEIVE_BATCHES=${LANDING_RECEIVE_BATCHES:-0} SLUICE_BENCH_VS_BARE_RATE=$landing_rate timeout 500 \
    "$pack/bin/socket_bench" --benchmark_filter='VsBare.*/8192' \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true > "$out/vs-bare-$landing_rate.log" 2>&1 || status=1
  cat "$out/vs-bare-$landing_rate.log" >> "$out/bench.log"
  vs_bare_rows+=("$(python3 - "$out/vs-bare-$landing_rate.log" "$landing_rate" <<'PY'
import re, sys
line = next((l for l in open(sys.argv[1]) if "_median" in l), "")
get = lambda name: (re.search(r"\b" + name + r"=([0-9.]+)", line) or [None, "?"])[1]
print(f"{float(sys.argv[2]) / 1e9:>8.1f} {get('stage_GBps'):>9} {get('bare_Mpps'):>9} {get('stage_Mpps'):>10} "
      f"{get('bare_rx_cpu_s_per_GB'):>10} {get('stage_rx_cpu_s_per_GB'):>11} {get('stage_vs_bare_cpu'):>12} "
      f"{get('bare_thread_cpu_s_per_GB'):>10} {get('stage_thread_cpu_s_per_GB'):>10} {get('stage_vs_bare_thread_cpu'):>13}")
PY
)")
  split_rows+=("$(python3 - "$out/vs-bare-$landing_rate.log" "$landing_rate" <<'PY'
import re, sys
line = next((l for l in open(sys.argv[1]) if "_median" in l), "")
get = lambda name: (re.search(r"\b" + name + r"=([0-9.]+)", line) or [None, "?"])[1]
print(f"{float(sys.argv[2]) / 1e9:>8.1f} {get('split_Mpps'):>10} {get('bare_rx_cpu_s_per_GB'):>10} "
      f"{get('split_rx_cpu_s_per_GB'):>10} {get('split_vs_bare_cpu'):>10} {get('bare_thread_cpu_s_per_GB'):>10} "
      f"{get('split_thread_cpu_s_per_GB'):>10} {get('split_vs_bare_thread_cpu'):>12} {get('split_place_cpu_s_per_GB'):>10} "
      f"{get('stage_thread_cpu_s_per_GB'):>11} {get('split_receive_waits_per_s'):>9} {get('bare_sleeps_per_MB'):>10} "
      f"{get('split_sleeps_per_MB'):>10} {get('bare_read_thread_cpu_s_per_GB'):>10} {get('split_vs_bare_read_thread_cpu'):>10} "
      f"{get('split_vs_bare_read_cpu'):>10}")
PY
)")
  echo "===== socket_bench Landing at $landing_rate B/s" | tee -a "$out/bench.log"
  SLUICE_BENCH_RECEIVE_BATCHES=${LANDING_RECEIVE_BATCHES:-0} SLUICE_BENCH_LANDING_RATE=$landing_rate timeout 300 \
    "$pack/bin/socket_bench" --benchmark_filter=Landing \
    > "$out/landing-$landing_rate.log" 2>&1 || status=1
  cat "$out/landing-$landing_rate.log" >> "$out/bench.log"
  landing_rows+=("$(python3 - "$out/landing-$landing_rate.log" "$landing_rate" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
get = lambda name: (re.search(r"\b" + name + r"=([0-9.]+)", text) or [None, "?"])[1]
print(f"{float(sys.argv[2]) / 1e9:>8.1f} {get('hot_rx_cpu_s_per_GB'):>10} {get('copy_rx_cpu_s_per_GB'):>10} "
      f"{get('land_rx_cpu_s_per_GB'):>10} {get('land_swap_rx_cpu_s_per_GB'):>10} {get('copy_vs_hot'):>8} {get('land_vs_hot'):>8} "
      f"{get('land_swap_vs_hot'):>9} {get('ring_rx_cpu_s_per_GB'):>10} {get('ring_read_rx_cpu_s_per_GB'):>10} "
      f"{get('ring_vs_hot'):>8} {get('ring_read_vs_hot'):>9}")
PY
)")
done
echo "receiving thread CPU s/GB by where the bytes go (socket_bench BM_ReceiveLanding, medians of 3)"
echo "(ring, ring_read: the receive thread's ring of batches, without and with the placing core reading it)"
printf '%8s %10s %10s %10s %10s %8s %8s %9s %10s %10s %8s %9s\n' "GB/s" "hot" "copy" "land" "land_swap" "copy/hot" \
  "land/hot" "lswap/hot" "ring" "ring_read" "ring/hot" "rread/hot"
printf '%s\n' "${landing_rows[@]}"
echo "udp stage vs bare loop at the same pace, CPU s/GB of the receive core and of the receiving thread alone"
echo "(socket_bench VsBare/8192, medians; goal <= 1.2)"
printf '%8s %9s %9s %10s %10s %11s %12s %10s %10s %13s\n' "paced" "stage GB/s" "bare Mpps" "stage Mpps" "bare s/GB" \
  "stage s/GB" "stage/bare" "bare thr" "stage thr" "thread ratio"
printf '%s\n' "${vs_bare_rows[@]}"
echo "the split (receive_thread: true) vs the bare loop at the same pace: its receive core and receive thread"
echo "CPU s/GB (goal <= 1.2), its placing thread's CPU s/GB beside the inline stage thread's, and how often a"
echo "second its receive thread found its ring full, and how often a MB the bare loop's and the receive thread's"
echo "threads slept and were woken; then the bare loop beside a reader on the placing core (pinned as the split"
echo "is): its thread's CPU s/GB and the split's thread and core ratios to it (socket_bench VsBare/8192, medians)"
printf '%8s %10s %10s %10s %10s %10s %10s %12s %10s %11s %9s %10s %10s %10s %10s %10s\n' "paced" "split Mpps" \
  "bare core" "split core" "core ratio" "bare thr" "rx thr" "thread ratio" "placing" "inline thr" "waits/s" \
  "bare sl/MB" "rx sl/MB" "b+read thr" "rx/b+read" "core/b+rd"
printf '%s\n' "${split_rows[@]}"
