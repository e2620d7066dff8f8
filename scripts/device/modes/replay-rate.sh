# replay-rate: striped replay --fast against fio, paced replay of two lanes at 3 GB/s, and one
# volume's replay against fio, in one call (modes/README.md).
# shellcheck shell=bash disable=SC2154,SC2034 # $pack, $out and status belong to run.sh, which sources this
replay_dir=/dev/shm/sluice-replay-rate
replay_summary="$out/replay-summary.txt"
: > "$replay_summary"
replay_row() {  # replay_row PART WHAT FIGURE BASELINE RATIO
  printf '%-8s %-64s %12s %12s %7s\n' "$@" >> "$replay_summary"
}

# JSON report → "REPLAY_GB/s FFT_IN_BYTES REPLAY_OUT_BYTES LATE DROPS LATE_READS LATE_DOWNSTREAM
# LATE_WAKEUPS MOST_US LATEST_US LATEST_CHUNK CHUNKS" for lane $2 (index).
replay_report() {
  python3 - "$1" "$2" <<'PY'
import json, sys
lane = json.load(open(sys.argv[1]))["lanes"][int(sys.argv[2])]
by = {s["name"]: s for s in lane["stages"]}
replay, fft = by["replay"], by.get("fft", by["sink"])
drops = sum(s["drops_total"] for s in lane["stages"])
late = replay["counters"]
print(f'{replay["bytes_per_second"] / 1e9:.2f} {fft["in"]["bytes"]} {replay["out"]["bytes"]} '
      f'{late.get("late_chunks", 0)} {drops} {late.get("late_reads", 0)} {late.get("late_downstream", 0)} '
      f'{late.get("late_wakeups", 0)} {late.get("late_most_us", 0)} '
      f'{late.get("late_latest_us", 0)} {late.get("late_latest_chunk", 0)} {replay["out"]["chunks"]}')
PY
}

replay_fio() {  # replay_fio FILE...: fio read, one job per file at once; prints GB/s
  local jobs=() i=0
  for file in "$@"; do jobs+=(--name="job$i" --filename="$file" --size="$(stat -c %s "$file")"); i=$((i + 1)); done
  fio --ioengine=io_uring --direct=1 --fixedbufs=1 --rw=read --bs=4M --iodepth=8 --iomem=malloc --group_reporting \
    --output-format=json "${jobs[@]}" 2>> "$out/replay-fio.log" |
    python3 -c 'import json, sys; print(round(json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"] / 1e9, 2))'
}

# The playback pipeline: replay → link (GPU memory) → fft → null (gpu) or replay → null (null),
# one lane per "NAME CAPTURE" argument.
replay_yaml() {  # replay_yaml gpu|null PACE LOOP ", duration: 10s"|"" "LANE CAPTURE"...
  local shape=$1 pace=$2 loop=$3 duration=$4
  shift 4
  echo "pipeline: {name: replay-rate, chunk: 4MiB, chunks: 16$duration}"
  echo "template:"
  echo "  - {name: replay, type: replay, capture: none, pace: $pace, loop: $loop, read_ahead: 8, chunks: 48, memory: host_pinned}"
  if [ "$shape" = gpu ]; then
    echo "  - {name: link, type: link, memory: device, chunks: 16}"
    echo "  - {name: fft, type: fft, backend: auto, size: 1024, window: hann, average: 1, output: power_db, memory: device, chunks: 16}"
  fi
  echo "  - {name: sink, type: \"null\"}"
  echo "lanes:"
  for lane in "$@"; do
    echo "  - {name: ${lane%% *}, replay: {capture: ${lane#* }}}"
  done
}

replay_record() {  # replay_record NAME RATE BYTES "LANE DIR,DIR..."...: records ramp lanes (generator unpaced)
  local name=$1 rate=$2 bytes=$3 lane
  shift 3
  {
    echo "pipeline: {name: $name, chunk: 4MiB, chunks: 32}"
    echo "template:"
    echo "  - {name: gen, type: generator, signal: ramp, sample_rate: $rate, stop_after: $bytes}"
    echo "  - {name: record, type: record, directory: [none], capture_name: $name}"
    echo "  - {name: sink, type: \"null\"}"
    echo "lanes:"
    for lane in "$@"; do
      echo "  - {name: ${lane%% *}, record: {capture_name: $name-${lane%% *}, directory: [${lane#* }]}}"
    done
  } > "$out/replay-record-$name.yaml"
  "$pack/bin/sluice" run -q "$out/replay-record-$name.yaml" > "$out/replay-record-$name.log" 2>&1 || status=1
}

bash "$pack/volumes.sh" remove "$replay_dir" > /dev/null
mapfile -t replay_mounts < <(bash "$pack/volumes.sh" make 5 "${REPLAY_VOLUME_SIZE:-8G}" ext4 "$replay_dir")
if [ "${#replay_mounts[@]}" -ne 5 ]; then
  echo "replay-rate: volumes.sh made ${#replay_mounts[@]} of 5 volumes"; status=1
else
  v=("${replay_mounts[@]}")

  # striped: one lane over the 4 volumes, fast, against fio on the same files.
  replay_record striped 100MHz "${REPLAY_STRIPED_BYTES:-16GiB}" "a ${v[0]},${v[1]},${v[2]},${v[3]}"
  mapfile -t striped_files < <(find "${v[@]:0:4}" -name 'striped-a*.sigmf-data' | sort)
  for shape in gpu null; do
    replay_yaml $shape fast false "" "a ${v[0]}/striped-a.sigmf-collection" > "$out/replay-striped-$shape.yaml"
  done
  gpu_rates=() null_rates=() fio_rates=()
  run_side() {  # run_side gpu|null|fio ROUND
    if [ "$1" = fio ]; then
      fio_rates+=("$(replay_fio "${striped_files[@]}")")
      return
    fi
    local rate fft_in replay_out late drops _
    "$pack/bin/sluice" run -q --report "$out/replay-striped-$1-$2.json" "$out/replay-striped-$1.yaml" \
      > "$out/replay-striped-$1-$2.log" 2>&1 || status=1
    read -r rate fft_in replay_out late drops _ < <(replay_report "$out/replay-striped-$1-$2.json" 0)
    if [ "$fft_in" != "$replay_out" ] || [ "$drops" != 0 ]; then
      echo "striped $1 round $2: the last stages took $fft_in of $replay_out bytes, $drops drops"; status=1
    fi
    if [ "$1" = gpu ]; then gpu_rates+=("$rate"); else null_rates+=("$rate"); fi
  }
  sides=(gpu null fio)
  for round in $(seq 1 "${REPLAY_ROUNDS:-3}"); do
    for k in 0 1 2; do run_side "${sides[$(((round + k) % 3))]}" "$round"; done
    echo "striped round $round: replay → GPU → fft ${gpu_rates[-1]} GB/s, replay → null ${null_rates[-1]} GB/s," \
      "fio ${fio_rates[-1]} GB/s (${#striped_files[@]} files)"
  done
  medians() { python3 -c 'import statistics as s, sys
m = [s.median(float(x) for x in a.split()) for a in sys.argv[1:]]
print(" ".join(f"{x:.2f}" for x in m), " ".join(f"{x / m[-1]:.2f}" for x in m[:-1]))' "$@"; }
  read -r gpu_median null_median fio_median gpu_ratio null_ratio < <(medians "${gpu_rates[*]}" "${null_rates[*]}" "${fio_rates[*]}")
  replay_row striped "replay --fast, 1 lane over 4 volumes → GPU → fft, GB/s (median)" "$gpu_median" "fio $fio_median" "$gpu_ratio"
  replay_row striped "replay --fast, the same → null (host), GB/s (median)" "$null_median" "fio $fio_median" "$null_ratio"

  # paced: two lanes at 3 GB/s each, each over two of the volumes, looped at the recorded rate.
  replay_record paced 750MHz "${REPLAY_PACED_BYTES:-4GiB}" "a ${v[0]},${v[1]}" "b ${v[2]},${v[3]}"
  replay_yaml gpu recorded true ", duration: ${REPLAY_PACED_SECONDS:-10}s" "a ${v[0]}/paced-a.sigmf-collection" \
    "b ${v[2]}/paced-b.sigmf-collection" > "$out/replay-paced.yaml"
  "$pack/bin/sluice" run -q --report "$out/replay-paced.json" "$out/replay-paced.yaml" > "$out/replay-paced.log" 2>&1 || status=1
  # realtime needs SCHED_FIFO, which a container without CAP_SYS_NICE refuses: then the row says so.
  realtime_refused=""
  if ! "$pack/bin/sluice" run -q --set template.replay.realtime=true --report "$out/replay-paced-rt.json" \
    "$out/replay-paced.yaml" > "$out/replay-paced-rt.log" 2>&1; then
    if grep -q 'pthread_setschedparam(SCHED_FIFO)' "$out/replay-paced-rt.log"; then
      realtime_refused="SCHED_FIFO not permitted here"
    else
      status=1
    fi
  fi
  for lane in 0 1; do
    read -r rate fft_in replay_out late drops late_reads late_downstream late_wakeups most_us latest_us latest_chunk chunks \
      < <(replay_report "$out/replay-paced.json" "$lane")
    if [ "$late" != 0 ] || [ "$drops" != 0 ] || [ "$fft_in" != "$replay_out" ]; then status=1; fi
    replay_row paced "lane $lane at the recorded 3 GB/s, ${REPLAY_PACED_SECONDS:-10} s: GB/s, late_chunks (drops $drops)" \
      "$rate" "late $late" "$(python3 -c "print(f'{$rate / 3.0:.2f}')")"
    replay_row paced "lane $lane late: reads $late_reads, downstream $late_downstream, thread $late_wakeups; us" \
      "latest $latest_us" "most $most_us" ""
    replay_row paced "lane $lane latest late chunk (0: the first), of the chunks replayed" "$latest_chunk" "of $chunks" ""
    if [ -n "$realtime_refused" ]; then
      replay_row paced-rt "lane $lane, realtime: true: refused ($realtime_refused)" - - -
      continue
    fi
    read -r rate fft_in replay_out late drops late_reads late_downstream late_wakeups most_us latest_us latest_chunk chunks \
      < <(replay_report "$out/replay-paced-rt.json" "$lane")
    replay_row paced-rt "lane $lane, realtime: true: GB/s, late (reads/downstream/thread), drops $drops" \
      "$rate" "late $late" "$late_reads/$late_downstream/$late_wakeups"
  done

  # one: the single-volume comparison that showed 0.76x, replay → page check against fio and raw io_uring.
  SLUICE_HUGE_PAGES=0 SLUICE_BENCH_DIR=${v[4]} SLUICE_BENCH_BYTES=${REPLAY_BYTES:-4GiB} timeout 280 \
    "$pack/bin/recorder_bench" --benchmark_filter=ReplayRead --benchmark_repetitions=5 \
    --benchmark_out="$out/replay-one.json" --benchmark_out_format=json > "$out/replay-one.log" 2>&1 || status=1
  python3 - "$out/replay-one.json" <<'PY' >> "$replay_summary" || status=1
import json, sys
median = next(b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("aggregate_name") == "median")
print(f"{'one':<8} {'recorder_bench replay (page check), 1 volume, MB/s; raw io_uring ' + str(round(median['raw_uring_MBps'])):<64} "
      f"{median['replay_MBps']:12.0f} {'fio ' + str(round(median['fio_MBps'])):>12} {median['ratio']:7.2f}")
PY
fi
bash "$pack/volumes.sh" remove "$replay_dir" > /dev/null || status=1
echo "===== replay at rate (issue 23): 4 ext4 volumes over /dev/shm (+1 for 'one'), 4 MiB, depth 8 a volume, O_DIRECT"
printf '%-8s %-64s %12s %12s %7s\n' part what figure baseline ratio
cat "$replay_summary"
