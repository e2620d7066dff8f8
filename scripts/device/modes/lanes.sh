# shellcheck disable=SC2154,SC2034 # $pack, $out, $mode and status belong to run.sh, which sources this
# lanes: issue 24's multi-lane ladder on a multi-GPU host, in three sub-modes that each fit one
# 600 s command (`lanes` runs all three: longer than one command at full size):
#   lanes-ladder   LANES lanes of udp → link (device) → fft (cuFFT fused, power dB) → record spectra
#                  → null, lane K on GPU K % GPUS; per-lane rates LADDER_RATES (GB/s, 10 s each) up
#                  to the first loss, each next to LANES bare receive loops on the same cores
#   lanes-soak     SOAK_LANES_SECONDS (30) at GOAL_RATE (5 GB/s per lane): counts reconciled stage
#                  to stage, the emulator's samples against the sources', spectra against the tone
#   lanes-onegpu   the soak with every lane on GPU 0, per-GPU PCIe receive bytes and SM / memory
#                  busy shares (nvidia-smi dmon; it has no copy-engine share: the PCIe receive rate
#                  against the link's, in gpu.txt, stands for it); lanes-soak records the same on GPUS
#                  GPUs. LANES=16 GPUS=4 on a 64-core four-GPU host.
# Cores (2 + 3 × LANES of them): 0-1 left to the system; receive threads on 2.., one each; each
# pair of lanes' light stages (link, fft, record, null) sharing two cores; one emulator sender
# thread per stream on the cores after those. 8 lanes fit 32 cores (26 used), 16 lanes 64 (50).
# Settings: LANES (8), GPUS (2), LADDER_RATES ("4 4.5 5 5.5 6"), GOAL_RATE (5), SOAK_LANES_SECONDS,
# SENDER_THREADS (sender threads per stream; passed as emulator.SENDER_KEY, sender_threads by
# default, where the emulator has that setting), EMULATOR_EXTRA and LANES_EXTRA (more --set
# arguments for the emulator and for sluice), LANES_FFT (cufft; fftw runs without a GPU, with
# GPUS=0 and no gpu: keys), LANES_LIGHT_CORES (2 cores per lane pair; 1 writes single cores),
# LANES_AVERAGE (128 spectra a row: 8 lanes at 5 GB/s record 0.3 GB/s of spectra, 30 s fit the disk).
# Needs sluice, sluice-emulator and udp_receive_loops packed. Without a GPU, on two cores:
#   LANES=2 GPUS=0 LANES_FFT=fftw LANES_LIGHT_CORES=1 LADDER_RATES="0.05 0.1" GOAL_RATE=0.05 ...
lanes_count=${LANES:-8}
lanes_gpus=${GPUS:-2}
lanes_fft=${LANES_FFT:-cufft}
lanes_light=${LANES_LIGHT_CORES:-2}
lanes_dir=/tmp/sluice-lanes
lanes_rows=()

lanes_average=${LANES_AVERAGE:-128}
# Core numbers wrap at the host's count, so that a tiny run (LANES=2 on a 2-core machine) still
# pins; on a host with 2 + 3 × LANES cores they are as laid out above.
lanes_core() { echo $(($1 % $(nproc))); }
lanes_rx_cpu() { lanes_core $((2 + $1)); }
lanes_light_cpus() {  # lanes_light_cpus LANE: the cores its light stages share ("a-b", or one core)
  local first=$((2 + lanes_count + ($1 / 2) * 2))
  if [ "$lanes_light" -ge 2 ]; then echo "\"$first-$((first + 1))\""; else lanes_core $((2 + lanes_count + $1)); fi
}
lanes_sender_cpu() { lanes_core $((2 + 2 * lanes_count + $1)); }

lanes_yaml() {  # lanes_yaml RATE_GBPS GPUS FILE: the pipeline and its emulator at RATE per lane
  local rate=$1 gpus=$2 file=$3 sps tone lane
  sps=$(python3 -c "print(int($rate * 1e9 / 4))")  # ci16: 4 bytes a sample
  tone=$((sps / 8))
  {
    echo "emulator:"
    echo "  autostart: false"
    echo "  transport: udp"
    echo "  streams:"
    for ((lane = 0; lane < lanes_count; lane++)); do
      echo "    - {address: 127.0.0.1:$((50200 + lane)), stream_id: $((lane + 1))}"
    done
    echo "  sample_rate: ${sps}sps"
    echo "  format: ci16"
    echo "  payload: 8972"
    echo "  rate: ${rate}GB/s"
    echo "  signal: {tones: [{frequency: ${tone}Hz, amplitude: 0.4}], noise_snr_db: 40, seed: 1}"
    echo "pipeline: {name: lanes, chunk: 16MiB, chunks: 32, duration: 0s, progress_interval: 1s}"
    echo "template:"
    echo "  - {name: source, type: udp, format: ci16, sample_rate: ${sps}sps, receive_buffer: 256MiB, max_datagram: 9000}"
    echo "  - {name: link, type: link, memory: $([ "$gpus" -gt 0 ] && echo device || echo host)}"
    if [ "$lanes_fft" = cufft ]; then
      echo "  - {name: fft, type: fft, backend: cufft, fusion: fused, size: 1024, window: hann, average: $lanes_average, output: power_db, memory: device, chunk: 4MiB, chunks: 16}"
    else
      echo "  - {name: fft, type: fft, backend: fftw, size: 1024, window: hann, average: $lanes_average, output: power_db, chunk: 4MiB, chunks: 16}"
    fi
    echo "  - {name: record, type: record, directory: $lanes_dir, capture_name: lanes, overwrite: true, preallocate: 256MiB}"
    echo "  - {name: sink, type: \"null\"}"
    echo "lanes:"
    for ((lane = 0; lane < lanes_count; lane++)); do
      local light
      light=$(lanes_light_cpus "$lane")
      echo "  - name: lane$lane"
      [ "$gpus" -gt 0 ] && echo "    gpu: $((lane % gpus))"
      echo "    source: {address: 127.0.0.1:$((50200 + lane)), stream_id: $((lane + 1)), cpu: $(lanes_rx_cpu "$lane")}"
      for stage in link fft record sink; do echo "    $stage: {cpu: $light}"; done
    done
  } > "$file"
}

lanes_send() {  # lanes_send NAME CONFIG SECONDS: every stream, one pinned sender thread each (or SENDER_THREADS)
  local cpus=() lane
  for ((lane = 0; lane < lanes_count; lane++)); do cpus+=(--cpu "$(lanes_sender_cpu "$lane")"); done
  local threads=()
  [ -n "${SENDER_THREADS:-}" ] && threads=(--set "emulator.${SENDER_KEY:-sender_threads}=$SENDER_THREADS")
  # shellcheck disable=SC2206  # EMULATOR_EXTRA: more --set arguments, split on spaces
  local extra=(${EMULATOR_EXTRA:-})
  cat /proc/stat > "$out/$1-stat-before.txt"
  "$pack/bin/sluice-emulator" "$2" --set "emulator.duration=${3}s" "${cpus[@]}" "${threads[@]}" "${extra[@]}" -q \
    2> "$out/$1-emulator.log"
  cat /proc/stat > "$out/$1-stat-after.txt"
}

lanes_rx_busy() {  # lanes_rx_busy NAME: the receive cores' busy shares over NAME's send, "min-max"
  local cores=() lane
  for ((lane = 0; lane < lanes_count; lane++)); do cores+=("$(lanes_rx_cpu "$lane")"); done
  python3 - "$out/$1-stat-before.txt" "$out/$1-stat-after.txt" "${cores[@]}" <<'PY'
import sys
def load(path):
    return {l.split()[0]: list(map(int, l.split()[1:9])) for l in open(path) if l.startswith("cpu") and l[3].isdigit()}
before, after = load(sys.argv[1]), load(sys.argv[2])
shares = []
for core in sorted(set(sys.argv[3:])):
    d = [a - b for a, b in zip(after[f"cpu{core}"], before[f"cpu{core}"])]
    shares.append(1 - (d[3] + d[4]) / (sum(d) or 1))
print(f"{min(shares):.2f}-{max(shares):.2f}")
PY
}

lanes_wait_bound() {  # lanes_wait_bound PID: until every lane's port is bound (60 s at most), then 2 s
  # more for the stages after the sources: a datagram sent before then waits in the socket, but
  # one the full socket dropped before the stream began is not counted anywhere but here.
  local lane port waited
  for ((waited = 0; waited < 120; waited++)); do
    for ((lane = 0; lane < lanes_count; lane++)); do
      port=$(printf '%04X' $((50200 + lane)))
      grep -q ":$port " /proc/net/udp || break
    done
    [ "$lane" = "$lanes_count" ] && break
    kill -0 "$1" 2> /dev/null || return
    sleep 0.5
  done
  sleep 2
}

lanes_pipeline() {  # lanes_pipeline RATE SECONDS GPUS NAME LABEL: one run; prints its row, returns 1 on loss
  local rate=$1 seconds=$2 gpus=$3 name=$4 label=$5
  local config="$out/$name.yaml"
  lanes_yaml "$rate" "$gpus" "$config"
  rm -rf "$lanes_dir"
  # shellcheck disable=SC2206  # LANES_EXTRA: more --set arguments, split on spaces
  local extra=(${LANES_EXTRA:-})
  "$pack/bin/sluice" run "$config" "${extra[@]}" --duration "$((seconds + 8))s" --report "$out/$name.json" \
    2> "$out/$name.log" > /dev/null &
  local pipeline=$!
  lanes_wait_bound $pipeline
  [ "$gpus" -gt 0 ] && command -v nvidia-smi > /dev/null &&
    { nvidia-smi dmon -s ut -d 1 > "$out/$name-dmon.txt" 2>&1 & echo $! > "$out/$name-dmon.pid"; }
  lanes_send "$name" "$config" "$seconds"
  [ -f "$out/$name-dmon.pid" ] && kill "$(cat "$out/$name-dmon.pid")" 2> /dev/null
  wait $pipeline || status=1
  local busy
  busy=$(lanes_rx_busy "$name")
  python3 - "$out/$name.json" "$out/$name-emulator.log" "$rate" "$lanes_count" "$busy" "$label" <<'PY'
import json, re, sys
report = json.load(open(sys.argv[1]))
sent = re.search(r"sent ([0-9]+) packets .*?([0-9.]+) ([GM])B/s; samples ([0-9]+)", open(sys.argv[2]).read())
lost = sum(lane["stages"][0]["counters"].get("lost_samples", 0) for lane in report["lanes"])
drops = sum(s.get("drops_total", 0) for lane in report["lanes"] for s in lane["stages"])
gbps = float(sent.group(2)) / (1 if sent.group(3) == "G" else 1000) if sent else 0
print(f"{sys.argv[6]:<9} {sys.argv[4]:>5} x {sys.argv[3]:>4} {gbps:>8.2f} {sent.group(1) if sent else '?':>12} "
      f"{lost:>12} {drops:>7} {sys.argv[5]:>10}")
sys.exit(1 if lost or drops or not sent else 0)
PY
}

lanes_loops() {  # lanes_loops RATE SECONDS NAME: LANES bare receive loops on the receive cores; its row
  local rate=$1 seconds=$2 name=$3 args=() lane
  local config="$out/$name.yaml"
  lanes_yaml "$rate" 0 "$config"
  for ((lane = 0; lane < lanes_count; lane++)); do args+=(--port $((50200 + lane)) --cpu "$(lanes_rx_cpu "$lane")"); done
  "$pack/bin/udp_receive_loops" "${args[@]}" --receive-buffer 256MiB --seconds "$((seconds + 20))" --idle 1 \
    > "$out/$name.json" 2> "$out/$name.log" &
  local loops=$!
  sleep 1
  lanes_send "$name" "$config" "$seconds"
  wait $loops || status=1
  local busy
  busy=$(lanes_rx_busy "$name")
  python3 - "$out/$name.json" "$out/$name-emulator.log" "$rate" "$lanes_count" "$busy" <<'PY'
import json, re, sys
received = json.load(open(sys.argv[1]))["packets"]
sent = re.search(r"sent ([0-9]+) packets .*?([0-9.]+) ([GM])B/s", open(sys.argv[2]).read())
lost = int(sent.group(1)) - received if sent else -1
gbps = float(sent.group(2)) / (1 if sent.group(3) == "G" else 1000) if sent else 0
print(f"{'loops':<9} {sys.argv[4]:>5} x {sys.argv[3]:>4} {gbps:>8.2f} {sent.group(1) if sent else '?':>12} "
      f"{str(lost) + ' pkts':>12} {'-':>7} {sys.argv[5]:>10}")
sys.exit(1 if lost != 0 else 0)
PY
}

lanes_check() {  # lanes_check NAME RATE: counts stage to stage and the spectra's peak at the tone, per lane
  python3 - "$out/$1.json" "$out/$1-emulator.log" "$lanes_dir" "$2" <<'PY' | tee -a "$out/lanes-checks.txt"
import glob, json, re, sys
from array import array
report, log, directory, rate = json.load(open(sys.argv[1])), open(sys.argv[2]).read(), sys.argv[3], float(sys.argv[4])
failed = False
sent = re.search(r"samples ([0-9]+)", log)
received = sum(l["stages"][0]["out"]["samples"] + l["stages"][0]["counters"].get("lost_samples", 0) for l in report["lanes"])
print(f"emulator samples {sent.group(1) if sent else '?'}, sources' samples + lost {received}")
failed |= not sent or int(sent.group(1)) != received
sps = int(rate * 1e9 / 4)
for lane in report["lanes"]:
    stages = lane["stages"]
    for a, b in zip(stages, stages[1:]):
        if a["out"]["chunks"] != b["in"]["chunks"] or a["out"]["samples"] != b["in"]["samples"]:
            print(f"{lane['name']}: {a['name']} out {a['out']} != {b['name']} in {b['in']}")
            failed = True
    drops = {s["name"]: s["drops_total"] for s in stages if s.get("drops_total")}
    if drops:
        print(f"{lane['name']}: drops {drops}")
        failed = True
    files = sorted(glob.glob(f"{directory}/lanes-{lane['name']}-*.sigmf-data"))
    rows = array("f")
    if files:  # the last 256 rows of the last file: spectra from the run's steady part
        with open(files[-1], "rb") as data:
            data.seek(0, 2)
            size = data.tell() // 4096 * 4096
            data.seek(max(0, size - 256 * 4096))
            rows.frombytes(data.read(min(size, 256 * 4096)))
    if len(rows) < 1024:
        print(f"{lane['name']}: no spectra in {directory}")
        failed = True
        continue
    count = len(rows) // 1024
    mean = [sum(rows[r * 1024 + k] for r in range(count)) / count for k in range(1024)]
    peak = max(range(1024), key=lambda k: mean[k])
    tone = 512 + round(1024 / 8)  # the tone at +rate/8; rows run from -rate/2 (zero frequency in bin 512)
    ok = abs(peak - tone) <= 1
    print(f"{lane['name']}: {count} spectra read, peak bin {peak} ({mean[peak]:.1f} dB), tone bin {tone}: {'ok' if ok else 'WRONG'}")
    failed |= not ok
sys.exit(1 if failed else 0)
PY
}

lanes_gpu_shares() {  # lanes_gpu_shares NAME: per GPU the mean SM and memory busy shares and PCIe receive GB/s
  [ -s "$out/$1-dmon.txt" ] || { echo "$1: no nvidia-smi dmon samples"; return; }
  python3 - "$out/$1-dmon.txt" "$1" <<'PY' | tee -a "$out/lanes-checks.txt"
import sys
columns, samples = [], {}
for line in open(sys.argv[1]):
    if line.startswith("# gpu"):
        columns = line[1:].split()
    elif columns and not line.startswith("#") and line.split():
        values = dict(zip(columns, line.split()))
        samples.setdefault(values["gpu"], []).append(values)
def mean(rows, key):
    numbers = [float(r[key]) for r in rows if r.get(key, "-").replace(".", "").isdigit()]
    return sum(numbers) / len(numbers) if numbers else float("nan")
for gpu, rows in sorted(samples.items()):
    busy = [r for r in rows if r.get("rxpci", "0") not in ("0", "-")]  # while data flowed
    print(f"{sys.argv[2]} GPU {gpu}: SM {mean(busy, 'sm'):.0f}%, memory {mean(busy, 'mem'):.0f}%, "
          f"PCIe rx {mean(busy, 'rxpci') / 1000:.2f} GB/s (H2D), tx {mean(busy, 'txpci') / 1000:.2f} GB/s")
PY
}

lanes_header() { printf '%-9s %5s   %4s %8s %12s %12s %7s %10s\n' run lanes GB/s "sent GB/s" "sent pkts" lost drops "rx busy"; }  # GB/s: per lane

lanes_ladder() {
  local rate pipeline_lost=0 loops_lost=0 row
  for rate in ${LADDER_RATES:-4 4.5 5 5.5 6}; do
    if [ "$pipeline_lost" = 0 ]; then
      row=$(lanes_pipeline "$rate" 10 "$lanes_gpus" "lanes-ladder-$rate" pipeline) || pipeline_lost=1
      lanes_rows+=("$row")
    fi
    if [ "$loops_lost" = 0 ]; then
      row=$(lanes_loops "$rate" 10 "lanes-loops-$rate") || loops_lost=1
      lanes_rows+=("$row")
    fi
    [ "$pipeline_lost" = 1 ] && [ "$loops_lost" = 1 ] && break
  done
}

lanes_soak() {  # lanes_soak GPUS LABEL
  local rate=${GOAL_RATE:-5} seconds=${SOAK_LANES_SECONDS:-30} row
  row=$(lanes_pipeline "$rate" "$seconds" "$1" "lanes-$2" "$2") || status=1
  lanes_rows+=("$row")
  lanes_check "lanes-$2" "$rate" || status=1
  lanes_gpu_shares "lanes-$2"
}

lanes_summary() {
  echo "lanes: $lanes_count lanes, GPUS=$lanes_gpus, fft $lanes_fft; checks in lanes-checks.txt"
  [ -f "$out/lanes-checks.txt" ] && grep -E "GPU|WRONG|!=|drops|samples" "$out/lanes-checks.txt" | tail -$((2 * lanes_count + 6))
  lanes_header
  printf '%s\n' "${lanes_rows[@]}"
}

case $mode in
  lanes) lanes_ladder; lanes_soak "$lanes_gpus" soak; lanes_soak 1 onegpu; lanes_summary ;;  # over 600 s at full size
  lanes-ladder) lanes_ladder; lanes_summary ;;
  lanes-soak) lanes_soak "$lanes_gpus" soak; lanes_summary ;;
  lanes-onegpu) lanes_soak 1 onegpu; lanes_summary ;;
esac
