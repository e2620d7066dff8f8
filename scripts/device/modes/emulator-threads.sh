# emulator-threads: the emulator's rate per stream with 1, 2 and 3 sender threads into two bare
# receive loops (EMU_RATES, EMU_THREADS, EMU_SECONDS, EMU_ROUNDS; EMU_BINARIES: emulators to
# compare, interleaved, default the packed one; modes/README.md).
emu_seconds=${EMU_SECONDS:-10}
emu_rows=()
read -r -a emu_loop_cores <<< "${EMU_LOOP_CORES:-2 8}"
emu_cores() {  # emu_cores THREADS STREAM: the stream's sender cores, as a YAML list
  local threads=$1 first=$((${EMU_FIRST_CORE:-10} + $2 * $1)) cores=()
  for ((i = 0; i < threads; i++)); do cores+=($((first + i))); done
  local IFS=,
  echo "[${cores[*]}]"
}
emu_run() {  # emu_run BINARY THREADS RATE ROUND: one run, one row
  local emulator=$1 threads=$2 rate=$3 round=$4 loops
  local name
  name="emu-$(basename "$emulator")-t$threads-${rate%%/*}-$round"
  "$pack/bin/udp_receive_loops" --port 50100 --cpu "${emu_loop_cores[0]}" --port 50101 --cpu "${emu_loop_cores[1]}" --receive-buffer 256MiB \
    --seconds "$((emu_seconds + 20))" --idle 1 > "$out/$name.json" 2> "$out/$name.log" &
  loops=$!
  sleep 1
  "$emulator" "$pack/configs/dual_port.yaml" --set "emulator.rate=$rate" \
    --set emulator.sample_rate=750Msps --set "emulator.duration=${emu_seconds}s" \
    --set "emulator.threads_per_stream=$threads" \
    --set "emulator.streams.0.cpus=$(emu_cores "$threads" 0)" --set "emulator.streams.1.cpus=$(emu_cores "$threads" 1)" \
    -q 2> "$out/$name-emulator.log" || status=1
  wait $loops || status=1
  # shellcheck disable=SC2046  # emulator_sent's two words are two arguments
  emu_rows+=("$(python3 - "$out/$name.json" "$threads" "$rate" $(emulator_sent "$name") "$(basename "$emulator")" <<'PY'
import json, sys
received = json.load(open(sys.argv[1]))["packets"]
sent, gbps = sys.argv[4], float(sys.argv[5])
lost = int(sent) - received if sent != "?" else -1
print(f"{sys.argv[6]:>20} {sys.argv[2]:>7} {sys.argv[3]:>9} {gbps:12.2f} {sent:>11} {received:>11} {lost:>9}")
PY
)")
}
for threads in ${EMU_THREADS:-1 2 3}; do
  for rate in ${EMU_RATES:-5GB/s 6GB/s 8GB/s}; do
    for round in $(seq "${EMU_ROUNDS:-1}"); do
      for emulator in ${EMU_BINARIES:-$pack/bin/sluice-emulator}; do emu_run "$emulator" "$threads" "$rate" "$round"; done
    done
  done
done
echo
echo "emulator sender threads per stream, 2 streams into 2 bare receive loops, ${emu_seconds} s each"
printf '%20s %7s %9s %12s %11s %11s %9s\n' emulator threads "rate/port" "sent GB/s" "sent pkts" "received" lost
printf '%s\n' "${emu_rows[@]}"
