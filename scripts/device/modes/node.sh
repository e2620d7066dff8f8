# node: the storage-node deployment as two `sluice run --node` processes over tcp, in parts
# (NODE_PARTS: link record ladder playback; modes/README.md says what each prints).
node_rate=${NODE_RATE:-3GB/s}
node_connections=${NODE_CONNECTIONS:-4}
node_mounts=/dev/shm/sluice-node
node_summary="$out/node-summary.txt"
: > "$node_summary"

# NODE_VOLUMES_PER_LANE (2) ext4 volumes a lane; a lane records over its own (node_lane_dirs).
# One loop device is one kernel thread copying into /dev/shm: two a lane keep each under 2 GB/s.
node_per_lane=${NODE_VOLUMES_PER_LANE:-2}
node_volumes() {  # the volumes, empty (each run starts on new ones)
  bash "$pack/volumes.sh" remove "$node_mounts" > /dev/null
  # /dev/shm is half the RAM by default; 10 s at 2 × 3 GB/s of spectra is 60 GB.
  mount -o remount,size=110G /dev/shm || echo "node: could not grow /dev/shm" >&2
  local count=$((2 * node_per_lane))
  mapfile -t node_dirs < <(bash "$pack/volumes.sh" make "$count" "${NODE_VOLUME_SIZE:-$((96 / count))G}" ext4 "$node_mounts")
  [ "${#node_dirs[@]}" -eq "$count" ] || { echo "node: volumes.sh made ${#node_dirs[@]} volumes" >&2; status=1; return 1; }
}
node_lane_dirs() {  # node_lane_dirs LANE [SUFFIX]: the lane's volumes as a YAML list, each with SUFFIX appended
  local dirs=() k
  for ((k = 0; k < node_per_lane; k++)); do dirs+=("${node_dirs[$1 * node_per_lane + k]}${2:-}"); done
  local IFS=,
  echo "[${dirs[*]}]"
}

# Cores: the emulator on 14 and 15 (paced_send). On a host of 32 cores or more each node runs on
# cores of its own (taskset): the GPU node on 0-13 with its sources pinned to 2 and 8, the storage
# node on 16-31; every other thread of a node floats over its node's cores and keeps off the
# sources'. On a smaller host every stage has a core: GPU node lanes 2-5 and 8-11, storage node 6-7
# and 12-13, and the link's connection threads float over what no stage takes.
node_pins_gpu=(--set lanes.port0.source.cpu=2 --set lanes.port1.source.cpu=8)
node_pins_storage=()
if [ "$(nproc)" -ge 32 ]; then
  node_gpu_cores=(taskset -c 0-13)
  node_storage_cores=(taskset -c 16-31)
else
  node_gpu_cores=()
  node_storage_cores=()
  node_pins_gpu+=(--set lanes.port0.link.cpu=3 --set lanes.port0.fft.cpu=4 --set lanes.port0.to_storage.cpu=5
                  --set lanes.port1.link.cpu=9 --set lanes.port1.fft.cpu=10 --set lanes.port1.to_storage.cpu=11)
  node_pins_storage=(--set lanes.port0.record.cpu=6 --set lanes.port0.sink.cpu=7 --set lanes.port1.record.cpu=12
                     --set lanes.port1.sink.cpu=13)
fi
node_load=(--set emulator.sample_rate=750Msps --set template.source.sample_rate=750Msps
           --set template.source.receive_buffer=256MiB --set lanes.port0.source.address=127.0.0.1:50100
           --set lanes.port1.source.address=127.0.0.1:50101 --set pipeline.chunk=16MiB --set pipeline.chunks=32
           --set template.fft.chunk=16MiB --set template.to_storage.chunks=32
           --set "template.to_storage.connections=$node_connections")

node_record_run() {  # node_record_run RATE SECONDS: one two-process run; prints its summary row
  local rate=$1 seconds=$2 name="node-${1%%/*}-$2s"
  node_volumes || return
  "${node_storage_cores[@]}" "$pack/bin/sluice" run "$pack/configs/storage_node.yaml" --node storage "${node_load[@]}" "${node_pins_storage[@]}" \
    --set "lanes.port0.record.directory=$(node_lane_dirs 0)" --set "lanes.port1.record.directory=$(node_lane_dirs 1)" \
    --set template.record.preallocate=1GiB --report "$out/$name-storage.json" 2> "$out/$name-storage.log" > /dev/null &
  local storage=$!
  "${node_gpu_cores[@]}" "$pack/bin/sluice" run "$pack/configs/storage_node.yaml" --node gpu "${node_load[@]}" "${node_pins_gpu[@]}" \
    --duration "$((seconds + 6))s" --report "$out/$name-gpu.json" 2> "$out/$name-gpu.log" > /dev/null &
  local gpu=$!
  sleep 4  # sockets bound, plans made, links connected
  paced_send "$name" "$rate" "$seconds"
  wait $gpu || status=1
  wait $storage || status=1
  # shellcheck disable=SC2046  # emulator_sent's two words are two arguments
  node_connections=$node_connections python3 - "$out/$name-gpu.json" "$out/$name-storage.json" "$rate" "$seconds" $(emulator_sent "$name") "${node_dirs[@]}" \
    <<'PY' | tee -a "$node_summary"
import glob, json, os, sys
gpu, storage = (json.load(open(p)) for p in sys.argv[1:3])
rate, seconds, (sent, gbps), dirs = sys.argv[3], sys.argv[4], sys.argv[5:7], sys.argv[7:]
connections = int(os.environ.get("node_connections", "4"))
received = lost = link_sent = link_received = on_disk = 0
rows = []
for lane, far in zip(gpu["lanes"], storage["lanes"]):
    source, half = lane["stages"][0], lane["stages"][-1]
    received += source["packets"]
    lost += source["counters"].get("lost_samples", 0)
    link_sent += half["out"]["bytes"]
    link_received += far["stages"][0]["out"]["bytes"]
    # The emulator paces both ports alike: each lane was sent half its packets.
    lane_sent = int(sent) // 2 if sent != "?" else None
    missing = lane_sent - source["packets"] if lane_sent is not None else "?"
    run = half["flow_seconds"] or half["seconds"] or 1  # while chunks flowed
    link_gbps = half["out"]["bytes"] / run / 1e9
    busy = half["busy_fraction_flowing"]
    counters = half["counters"]
    credit_wait = counters.get("credit_wait_us", 0) / 1e6 / run
    writing = counters.get("connections_writing_us", 0) / 1e6 / run / connections
    writing_cpu = counters.get("connections_writing_cpu_us", 0) / 1e6 / run / connections
    rows.append(f'  {lane["name"]}: packets sent {lane_sent if lane_sent is not None else "?"} received {source["packets"]} '
                f'missing {missing} (lost_packets {source["counters"].get("lost_packets", 0)}); sending half '
                f'{link_gbps:.2f} GB/s, busy {busy:.0%} ({busy / max(link_gbps, 1e-9):.1%} per GB/s), '
                f'waiting for credits {credit_wait:.1%}, each of {connections} connections writing {writing:.1%} (CPU {writing_cpu:.1%}); '
                f'record busy {far["stages"][1]["busy_fraction"]:.0%}')
for d in dirs:
    on_disk += sum(os.path.getsize(f) for f in glob.glob(os.path.join(d, "**", "*.sigmf-data"), recursive=True))
ok = lost == 0 and link_sent == link_received == on_disk and link_sent > 0
print(f"record {rate:>7} {seconds:>3}s sent {sent} pkts {float(gbps):.2f} GB/s, received {received} pkts, lost samples {lost}, "
      f"link {link_sent / 1e9:.2f} GB sent / {link_received / 1e9:.2f} GB received, {on_disk / 1e9:.2f} GB on disk, "
      f"{'lossless' if ok else 'LOSS/MISMATCH'}")
print("\n".join(rows))
sys.exit(0 if ok else 1)
PY
}

node_playback() {  # raw samples recorded onto the volumes, then replayed through the GPU node's fft
  node_volumes || return
  local raw="$out/node-raw.yaml"
  cat > "$raw" <<YAML
pipeline: {name: raw, chunk: 16MiB, chunks: 32}
template:
  - {name: source, type: udp, format: ci16, sample_rate: 750Msps, receive_buffer: 256MiB, max_datagram: 9000}
  - {name: record, type: record, directory: /tmp, capture_name: raw, overwrite: true, preallocate: 1GiB}
  - {name: sink, type: "null"}
lanes:
  - {name: port0, source: {address: 127.0.0.1:50100, stream_id: 1, cpu: 2}, record: {directory: $(node_lane_dirs 0), cpu: 3}}
  - {name: port1, source: {address: 127.0.0.1:50101, stream_id: 2, cpu: 8}, record: {directory: $(node_lane_dirs 1), cpu: 9}}
YAML
  "$pack/bin/sluice" run "$raw" --duration 12s --report "$out/node-raw.json" 2> "$out/node-raw.log" > /dev/null &
  local recorder=$!
  sleep 3
  paced_send node-raw "$node_rate" 6
  wait $recorder || status=1
  for pace in fast recorded; do
    local name="node-playback-$pace"
    "$pack/bin/sluice" run "$pack/configs/storage_node_playback.yaml" --node gpu --set template.record.enabled=false \
      --set pipeline.chunk=16MiB --set pipeline.chunks=32 --set template.fft.chunk=16MiB \
      --set "template.to_gpu.connections=$node_connections" --report "$out/$name-gpu.json" 2> "$out/$name-gpu.log" > /dev/null &
    local gpu=$!
    local started=$(date +%s.%N)
    "$pack/bin/sluice" run "$pack/configs/storage_node_playback.yaml" --node storage \
      --set "lanes.port0.replay.capture=${node_dirs[0]}/raw.sigmf-collection" \
      --set "lanes.port1.replay.capture=${node_dirs[node_per_lane]}/raw.sigmf-collection" \
      --set "template.replay.pace=$pace" --set pipeline.chunk=16MiB --set pipeline.chunks=32 \
      --report "$out/$name-storage.json" 2> "$out/$name-storage.log" > /dev/null || status=1
    wait $gpu || status=1
    python3 - "$out/$name-gpu.json" "$out/$name-storage.json" "$out/node-raw.json" "$pace" "$started" <<'PY' | tee -a "$node_summary"
import json, sys, time
gpu, storage, raw = (json.load(open(p)) for p in sys.argv[1:4])
recorded = sum(l["stages"][0]["out"]["bytes"] for l in raw["lanes"])
replayed = sum(l["stages"][0]["out"]["bytes"] for l in storage["lanes"])
landed = sum(l["stages"][0]["out"]["bytes"] for l in gpu["lanes"])
rows = sum(next((s["counters"].get("rows", 0) for s in l["stages"] if s["name"] == "fft"), 0) for l in gpu["lanes"])
# One row per 1024 samples (ci16: 4 bytes) a lane landed; a lane's last partial frame is left over.
rows_expected = sum(l["stages"][0]["out"]["bytes"] // 4 // 1024 for l in gpu["lanes"])
late = [l["stages"][0]["counters"].get("late_chunks") for l in storage["lanes"]]
late = "?" if None in late else sum(late)
seconds = max(l["stages"][0]["flow_seconds"] for l in storage["lanes"]) or (time.time() - float(sys.argv[5]))
ok = recorded == replayed == landed > 0 and rows == rows_expected and (sys.argv[4] == "fast" or late == 0)
print(f"playback {sys.argv[4]:>8}: recorded {recorded / 1e9:.2f} GB, replayed {replayed / 1e9:.2f} GB, landed in GPU {landed / 1e9:.2f} GB, "
      f"fft rows {rows} of {rows_expected}, {replayed / seconds / 1e9:.2f} GB/s over {seconds:.1f} s, late chunks {late}, {'ok' if ok else 'MISMATCH'}")
sys.exit(0 if ok else 1)
PY
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  done
}

for part in ${NODE_PARTS:-link record ladder playback}; do
  case $part in
    link)
      echo "===== link_tcp_bench" | tee -a "$out/bench.log"
      timeout 500 "$pack/bin/link_tcp_bench" 2048 5 "$node_connections" 2>&1 | tee -a "$out/bench.log" | tail -4 \
        | sed 's/^/link_tcp_bench /' | tee -a "$node_summary"
      ;;
    record) node_record_run "$node_rate" "${NODE_SECONDS:-10}" || status=1 ;;
    ladder)
      for rate in ${NODE_RATES:-3.5GB/s 4GB/s 4.5GB/s 5GB/s 5.5GB/s}; do
        node_record_run "$rate" 5 || break
      done
      ;;
    playback) node_playback ;;
    *) echo "node: unknown part $part" >&2; status=1 ;;
  esac
done
bash "$pack/volumes.sh" remove "$node_mounts" > /dev/null || status=1
echo "===== node summary"
cat "$node_summary"
