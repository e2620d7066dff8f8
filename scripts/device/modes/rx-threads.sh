# rx-threads: one stream faster than one core copies, into one udp stage with 1, 2 and 3 receive
# threads (receive_threads) on the one socket. Per run: the emulator sends RX_SECONDS (10) at
# each rate of RX_RATES (GB/s, default "5 7 9") with RX_SENDERS (3) sender threads, pinned to
# cores RX_SENDER_CORE (12) on; the stage's receive threads on cores RX_FIRST_CORE (2) on, its own
# thread on RX_STAGE_CORE (8), into null. RX_THREADS ("1 2 3") and RX_ROUNDS (2, taking turns)
# set the grid. Prints per run the rate sent, packets lost, the stage's reorder count (the
# senders keep the stream in order, so the merge must add none), its merge holds and the time
# its threads were kept off their cores, in a table last: the highest lossless rate per thread
# count is the figure, each against one thread in the same call.
# Needs sluice and sluice-emulator packed.
rx_seconds=${RX_SECONDS:-10}
rx_rows=()

rx_yaml() {  # rx_yaml RATE THREADS FILE
  local rate=$1 threads=$2 file=$3 sps senders=() k
  sps=$(python3 -c "print(int($rate * 1e9 / 4))")
  local first=${RX_FIRST_CORE:-2}
  for ((k = 0; k < ${RX_SENDERS:-3}; k++)); do senders+=($((${RX_SENDER_CORE:-12} + k))); done
  {
    echo "emulator:"
    echo "  autostart: false"
    echo "  transport: udp"
    echo "  streams: [{address: 127.0.0.1:50300, stream_id: 1, cpus: [$(IFS=,; echo "${senders[*]}")]}]"
    echo "  threads_per_stream: ${#senders[@]}"
    echo "  sample_rate: ${sps}sps"
    echo "  format: ci16"
    echo "  payload: 8972"
    echo "  rate: ${rate}GB/s"
    echo "  signal: {tones: [{frequency: $((sps / 8))Hz, amplitude: 0.4}], noise_snr_db: 40, seed: 1}"
    echo "pipeline: {name: rx_threads, chunk: 16MiB, chunks: 32, duration: 0s}"
    echo "lanes:"
    echo "  - name: port0"
    echo "    stages:"
    echo "      - {name: source, type: udp, address: 127.0.0.1:50300, stream_id: 1, format: ci16,"
    echo "         sample_rate: ${sps}sps, receive_buffer: 1GiB, max_datagram: 9000, receive_thread: true,"
    echo "         receive_threads: $threads, receive_cpu: $first-$((first + threads - 1)), cpu: ${RX_STAGE_CORE:-8},"
    echo "         receive_spin: 10ms}"
    echo "      - {name: sink, type: \"null\"}"
  } > "$file"
}

rx_run() {  # rx_run RATE THREADS ROUND: one run, one row
  local rate=$1 threads=$2 round=$3 name="rx-$1-t$2-$3" pipeline
  rx_yaml "$rate" "$threads" "$out/$name.yaml"
  "$pack/bin/sluice" run "$out/$name.yaml" --duration "$((rx_seconds + 8))s" --report "$out/$name.json" \
    2> "$out/$name.log" > /dev/null &
  pipeline=$!
  udp_bound $pipeline 50300
  "$pack/bin/sluice-emulator" "$out/$name.yaml" --set "emulator.duration=${rx_seconds}s" -q 2> "$out/$name-emulator.log" ||
    status=1
  wait $pipeline || status=1
  # shellcheck disable=SC2046  # emulator_sent's two words are two arguments
  rx_rows+=("$(python3 - "$out/$name.json" "$rate" "$threads" "$round" $(emulator_sent "$name") <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
source = report["lanes"][0]["stages"][0]
counters = source["counters"]
sent, gbps = sys.argv[5], float(sys.argv[6])
lost = counters.get("lost_packets", 0)
waits = {t["name"]: t for t in source.get("threads", [])}
print(f"{sys.argv[3]:>7} {sys.argv[2]:>6} {sys.argv[4]:>5} {gbps:10.2f} {sent:>11} {lost:>9} "
      f"{counters.get('reordered', 0):>9} {counters.get('receive_merge_holds', 0):>7} "
      f"{sum(t['core_wait_seconds'] for t in waits.values()) * 1e3:>9.1f}")
PY
)")
}

for round in $(seq "${RX_ROUNDS:-2}"); do
  for rate in ${RX_RATES:-5 7 9}; do
    for threads in ${RX_THREADS:-1 2 3}; do rx_run "$rate" "$threads" "$round"; done
  done
done
echo
echo "one stream into one udp stage with 1..3 receive threads on its socket, ${rx_seconds} s a run"
printf '%7s %6s %5s %10s %11s %9s %9s %7s %9s\n' threads "GB/s" round "sent GB/s" "sent pkts" lost reordered holds "waits ms"
printf '%s\n' "${rx_rows[@]}"
