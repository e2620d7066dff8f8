# shellcheck disable=SC2154,SC2034 # $pack, $out, $mode and status belong to run.sh, which sources this
# replay-rate: recorder_bench's BM_ReplayReadVsFio (replay → page check against fio and the raw
# io_uring loop, same file, 4 MiB reads, depth 8, O_DIRECT, medians of 5) on one ext4 loop volume
# over /dev/shm and on the host's own disk (REPLAY_DISK_DIR, default /tmp), in 4 KiB pages both
# sides, and in huge pages too where 2 MiB pages are reserved. REPLAY_BYTES (4GiB) per side.
# Needs recorder_bench and fio packed.
replay_rows=()
replay_mounts=/dev/shm/sluice-replay-rate
replay_run() {  # replay_run PLACE DIR PAGES(0|1)
  local log="$out/replay-rate-$1-pages$3.log"
  echo "===== recorder_bench ReplayRead on $1 ($2), SLUICE_HUGE_PAGES=$3" | tee -a "$out/bench.log"
  SLUICE_HUGE_PAGES=$3 SLUICE_BENCH_DIR=$2 SLUICE_BENCH_BYTES=${REPLAY_BYTES:-4GiB} timeout 280 \
    "$pack/bin/recorder_bench" --benchmark_filter=ReplayRead --benchmark_repetitions=5 > "$log" 2>&1 || status=1
  cat "$log" >> "$out/bench.log"
  replay_rows+=("$(python3 - "$log" "$1" "$3" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
line = next((l for l in text.splitlines() if "_median" in l), "")
get = lambda name: (re.search(name + r"=([0-9.]+k?)", line) or [None, "?"])[1]
pages = "4 KiB" if sys.argv[3] == "0" else "2 MiB"
print(f"{sys.argv[2]:<8} {pages:>6} {get('replay_MBps'):>10} {get('fio_MBps'):>10} {get('raw_uring_MBps'):>10} "
      f"{get('ratio'):>10} {get('ratio_raw'):>10}")
PY
)")
}
bash "$pack/volumes.sh" remove "$replay_mounts" > /dev/null
mapfile -t replay_dirs < <(bash "$pack/volumes.sh" make 1 "${REPLAY_VOLUME_SIZE:-12G}" ext4 "$replay_mounts")
replay_page_modes="0"
[ "$(cat /proc/sys/vm/nr_hugepages)" -ge 64 ] && replay_page_modes="0 1"
for pages in $replay_page_modes; do
  [ "${#replay_dirs[@]}" -eq 1 ] && replay_run ram-ext4 "${replay_dirs[0]}" "$pages"
  replay_run disk "${REPLAY_DISK_DIR:-/tmp}/sluice-replay-rate" "$pages"
done
bash "$pack/volumes.sh" remove "$replay_mounts" > /dev/null || status=1
rm -rf "${REPLAY_DISK_DIR:-/tmp}/sluice-replay-rate"
[ "$replay_page_modes" = "0" ] && echo "huge-page rows left out: fewer than 64 2 MiB pages reserved (/proc/sys/vm/nr_hugepages)"
echo "replay read against fio and raw io_uring, same file, 4 MiB, depth 8, O_DIRECT (medians of 5; MB/s)"
printf '%-8s %6s %10s %10s %10s %10s %10s\n' place pages replay fio raw_uring replay/fio replay/raw
printf '%s\n' "${replay_rows[@]}"
