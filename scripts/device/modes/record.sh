# Helpers for the recorder modes (record-fresh, -stripes, -rotation, -dual, -step, -ab); `run.sh
# record` prints the summary table the parts run so far added to (modes/README.md: order, volumes).
# shellcheck shell=bash
record_summary=/tmp/sluice-record-summary.txt  # kept on the machine between commands
record_volumes=/dev/shm/sluice-record

record_row() {  # record_row PART WHAT FIGURE BASELINE RATIO: one row of the summary
  printf '%-10s %-58s %14s %14s %7s\n' "$@" >> "$record_summary"
}

record_table() {
  echo "===== recorder summary (rows in the order the parts ran)"
  printf '%-10s %-58s %14s %14s %7s\n' part what figure baseline ratio
  cat "$record_summary" 2> /dev/null
  cp "$record_summary" "$out/record-summary.txt" 2> /dev/null || true
}

record_make_volumes() {  # record_make_volumes N [SIZE]: N volumes of SIZE (RECORD_VOLUME_SIZE, 17G), written once
  # unless VOLUMES_TOUCH=0, made again only when the last call asked for others; mount points into record_mounts
  local want="$1 ${2:-${RECORD_VOLUME_SIZE:-17G}}" touched="touch=${VOLUMES_TOUCH:-1}"
  if [ "$(cat "$record_volumes.made" 2> /dev/null)" != "$want $touched" ]; then
    bash "$pack/volumes.sh" remove "$record_volumes" > /dev/null
    rm -f "$record_volumes.made"
    # shellcheck disable=SC2086  # N and SIZE
    bash "$pack/volumes.sh" make $want ext4 "$record_volumes" > /dev/null && echo "$want $touched" > "$record_volumes.made" || status=1
  fi
  mapfile -t record_mounts < <(find "$record_volumes/mnt" -mindepth 1 -maxdepth 1 | sort)
}

record_fio() {  # record_fio BYTES FILE...: fio write, one job per file at once (4 MiB, depth 8, O_DIRECT); prints MB/s
  local bytes=$1 jobs=() i=0
  shift
  for file in "$@"; do jobs+=(--name="job$i" --filename="$file"); i=$((i + 1)); done
  fio --ioengine=io_uring --direct=1 --rw=write --bs=4M --iodepth=8 --size="$bytes" --end_fsync=1 --group_reporting \
    --output-format=json "${jobs[@]}" 2>> "$out/record-fio.log" |
    python3 -c 'import json, sys; print(round(json.load(sys.stdin)["jobs"][0]["write"]["bw_bytes"] / 1e6))'
}

record_huge_pages() {  # record_huge_pages: SLUICE_HUGE_PAGES for recorder_bench, the same page size on both sides:
  # 1 when RECORD_HUGE_PAGES (1) asks for them and 256 2 MiB pages could be reserved for fio --iomem=mmaphuge, else 0
  if [ "${RECORD_HUGE_PAGES:-1}" = 1 ]; then
    [ "$(cat /proc/sys/vm/nr_hugepages)" -ge 256 ] || echo 256 > /proc/sys/vm/nr_hugepages 2> /dev/null || true
    [ "$(cat /proc/sys/vm/nr_hugepages)" -ge 256 ] && { echo 1; return; }
  fi
  echo 0
}

record_vs_fio() {  # record_vs_fio NAME REPETITIONS: recorder_bench's striped write (one lane over every volume in
  # record_mounts, depth 8 a volume, 4 MiB, O_DIRECT, RECORD_STRIPE_BYTES a volume: 12GiB, about 3 s a side, so that
  # one stall of a loop device's thread moves a run less) against fio with one job per volume at once; summary rows:
  # the medians' ratio, each run's, and the median run's busy, depth and idle
  local name=$1 repetitions=$2 dirs huge
  dirs=$(IFS=:; echo "${record_mounts[*]}")
  huge=$(record_huge_pages)
  SLUICE_HUGE_PAGES=$huge SLUICE_BENCH_DIRS=$dirs SLUICE_BENCH_BYTES=${RECORD_STRIPE_BYTES:-12GiB} timeout 400 \
    "${RECORD_BENCH:-$pack/bin/recorder_bench}" --benchmark_filter=Striped --benchmark_repetitions="$repetitions" \
    --benchmark_out="$out/$name.json" --benchmark_out_format=json >> "$out/record-bench.log" 2>&1 || status=1
  python3 - "$out/$name.json" "$name" "${#record_mounts[@]}" "$huge" <<'PY' >> "$record_summary" || status=1
import json, statistics, sys
runs = [b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("run_type") == "iteration"]
pick = sorted(runs, key=lambda b: b["ratio"])[len(runs) // 2]  # the median run's own figures
pages = "2 MiB" if sys.argv[4] == "1" else "4 KiB"
ours = statistics.median(b["recorder_MBps"] for b in runs)
fio = statistics.median(b["fio_MBps"] for b in runs)
print(f"{sys.argv[2]:<10} {'recorder, one lane over ' + sys.argv[3] + ' volumes vs fio, ' + pages + ' pages, MB/s':<58} "
      f"{ours:14.0f} {'fio ' + str(round(fio)):>14} {ours / fio:7.2f}")
print(f"{sys.argv[2]:<10} {'the same, each run (recorder / fio)':<58} "
      f"{' '.join(format(b['ratio'], '.2f') for b in runs):>37}")
# Busy near 1: the one thread that submits and reaps for every volume bounds the recorder.
# Writes in the kernel a volume below fio's 8, and time in which some volume has none: chunks
# leave in order, so a volume far behind the others holds them up; the chunks passed on from a
# busy volume say how often one was.
print(f"{sys.argv[2]:<10} {'the same run: submitting thread busy; writes in kernel a volume':<58} "
      f"{'busy ' + format(pick.get('thread_busy', -1), '.2f'):>14} {'depth ' + format(pick.get('kernel_depth', -1), '.1f'):>14} {'-':>7}")
print(f"{sys.argv[2]:<10} {'the same run: share of the time some volume had no write':<58} "
      f"{pick.get('volume_idle', -1):14.2f} {'-':>14} {'-':>7}")
print(f"{sys.argv[2]:<10} {'the same run: share of chunks passed on from a busy volume':<58} "
      f"{pick.get('passed_share', -1):14.2f} {'-':>14} {'-':>7}")
print(f"{sys.argv[2]:<10} {'the same run: share of the pool on 2 MiB pages (THP; fio: reserved)':<58} "
      f"{pick.get('huge_fraction', -1):14.2f} {'-':>14} {'-':>7}")
print(f"{sys.argv[2]:<10} {'the same run: share in take_done (journal) / submit':<58} "
      f"{pick.get('retire_share', -1):14.3f} {pick.get('submit_share', -1):14.3f} {'-':>7}")
print(f"{sys.argv[2]:<10} {'the same run: longest take_done / submit, ms':<58} "
      f"{pick.get('longest_retire_ms', -1):14.1f} {pick.get('longest_submit_ms', -1):14.1f} {'-':>7}")
PY
}

# configs/dual_port.yaml with a second raw tap, gpu_raw, after the link (GPU memory, through
# the record stage's pinned bounce): port0 records raw before the link, port1 after it.
record_config() {
  sed '/^  - name: fft$/i\  - name: gpu_raw\n    type: record\n    directory: /tmp/sluice-dual-port\n    capture_name: dual_port-gpu-raw\n    overwrite: true\n    preallocate: 1GiB' \
    "$pack/configs/dual_port.yaml" > /tmp/sluice-record-dual.yaml
}

record_dual_run() {  # record_dual_run RATE SECONDS on|off: dual_run with the raw taps over the 4 volumes (on) or
  # without them (off); prints "label rate GB/s sent lost_pkts drops tap_samples info"
  local rate=$1 seconds=$2 taps=$3 name="record-${1%%/*}-$2s-$3"
  for mount in "${record_mounts[@]}"; do rm -rf "$mount/cap"; done
  rm -rf /tmp/sluice-dual-port
  local set=(--set emulator.autostart=false --set emulator.sample_rate=750Msps --set template.source.sample_rate=750Msps
    --set template.source.receive_buffer=256MiB --set pipeline.chunk=16MiB --set pipeline.chunks=32
    --set template.fft.chunk=4MiB --set template.record.preallocate=1GiB
    --set lanes.port0.source.cpu=2 --set lanes.port0.link.cpu=3 --set lanes.port0.fft.cpu=4 --set lanes.port0.record.cpu=5
    --set lanes.port0.sink.cpu=6 --set lanes.port0.raw.cpu=7 --set lanes.port1.source.cpu=8 --set lanes.port1.link.cpu=9
    --set lanes.port1.fft.cpu=10 --set lanes.port1.record.cpu=11 --set lanes.port1.sink.cpu=12 --set lanes.port1.gpu_raw.cpu=13
    --set lanes.port1.raw.enabled=false --set lanes.port0.gpu_raw.enabled=false
    --set "lanes.port0.raw.directory=[${record_mounts[0]}/cap, ${record_mounts[1]}/cap]"
    --set "lanes.port1.gpu_raw.directory=[${record_mounts[2]}/cap, ${record_mounts[3]}/cap]"
    --set template.raw.preallocate=1GiB)
  [ "$taps" = on ] || set+=(--set template.raw.enabled=false --set template.gpu_raw.enabled=false)
  # shellcheck disable=SC2206  # RECORD_EXTRA: more --set words, e.g. "--set template.raw.rotate=4GiB"
  set+=(${RECORD_EXTRA:-})
  "$pack/bin/sluice" run /tmp/sluice-record-dual.yaml "${set[@]}" --duration "$((seconds + 6))s" \
    --set pipeline.progress_interval=1s --report "$out/$name.json" 2> "$out/$name.log" > /dev/null &
  local pipeline=$!
  sleep 4
  paced_send "$name" "$rate" "$seconds"
  wait $pipeline || status=1
  local info=-
  if [ "$taps" = on ]; then
    info=bit-exact
    for capture in "${record_mounts[0]}/cap/dual_port-raw.sigmf-collection" "${record_mounts[2]}/cap/dual_port-gpu-raw.sigmf-collection"; do
      "$pack/bin/sluice" capture info "$capture" >> "$out/$name-info.txt" 2>&1 || info=FAILED
      # Every recorded sample against the emulator's signal at its stream index (the same overrides).
      "$pack/bin/sluice-emulator" "$pack/configs/dual_port.yaml" --set emulator.sample_rate=750Msps --check "$capture" \
        >> "$out/$name-info.txt" 2>&1 || info=NOT-THE-SIGNAL
    done
  fi
  # shellcheck disable=SC2046  # emulator_sent's two words are two arguments
  python3 - "$out/$name.json" "$rate" "$taps" "$info" $(emulator_sent "$name") <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
lost = drops = tapped = received = 0
for lane in report["lanes"]:
    stages = lane["stages"]
    lost += stages[0]["counters"].get("lost_packets", 0)
    drops += sum(s.get("drops_total", 0) for s in stages)
    received += stages[0]["out"]["samples"]
    tapped += sum(s["in"]["samples"] for s in stages if s["name"] in ("raw", "gpu_raw"))
    for s in stages:  # where a lane's chunks may wait behind its recording
        if s["name"] in ("raw", "gpu_raw", "record"):
            c = s["counters"]
            print(f'{lane["name"]}.{s["name"]}: writes {s.get("bytes_per_second", 0) / 1e9:.2f} GB/s, longest submit '
                  f'{c.get("longest_submit_us", 0) / 1e3:.1f} ms, longest bounce {c.get("longest_bounce_us", 0) / 1e3:.1f} ms, '
                  f'busy {s.get("busy_fraction_flowing", 0):.2f}', file=open(sys.argv[1].replace(".json", "-taps.txt"), "a"))
whole = "all" if tapped == received else f"{tapped}/{received}"
print(f"taps-{sys.argv[3]:<4}{sys.argv[2]:>9} {float(sys.argv[6]):9.2f} {sys.argv[5]:>11} {lost:>10} {drops:>6} {whole if sys.argv[3] == 'on' else '-':>12} {sys.argv[4]:>6}")
PY
}

[ "${mode:-}" != record ] || record_table
