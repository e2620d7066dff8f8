#!/usr/bin/env bash
# Runs on the lent GPU machine from the packed folder (.device/ or any name: paths come from where it
# sits): bash .device/run.sh MODE...; each mode is described at its case below, and modes/NAME.sh
# adds more. Everything is logged into a few files under $OUT.
set -uo pipefail
pack=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH="$pack/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
export PATH="$pack/bin:$PATH"  # fio, packed by pack.sh, for recorder_bench
# The tests that run programs find them in the pack, not the build tree; the files they read
# (configs, scripts/volumes.sh, tests/recorder's validators) in the tree the command runs in.
export SLUICE_BINARY="$pack/bin/sluice" SLUICE_EMULATOR="$pack/bin/sluice-emulator" SLUICE_SOURCE_DIR="$PWD"
export SLUICE_UDP_RECEIVE_LOOPS="$pack/bin/udp_receive_loops"
out=${OUT:-/tmp/out}
soak_dir=/tmp/sluice-soak  # soak-start and soak-wait
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader \
  | tee "$out/gpu.txt"
nproc | tee -a "$out/gpu.txt"
status=0

detail_line() {  # detail_line NAME [REPORT]: one line into dual-detail.txt from NAME's /proc/stat snapshots
  python3 - "$out/$1-stat-before.txt" "$out/$1-stat-after.txt" "$1" "${2:-}" <<'PY' >> "$out/dual-detail.txt"
import json, sys
# Per core: the shares of user, system, softirq, idle and steal time; per stage of a pipeline's
# report: its pool waits (count, longest).
parts = []
if sys.argv[4]:
    for lane in json.load(open(sys.argv[4]))["lanes"]:
        for s in lane["stages"]:
            waits = s.get("pool_waits", {})
            if waits.get("count"):
                parts.append(f'{lane["name"]}.{s["name"]} pool waits {waits["count"]} longest {waits["longest_seconds"] * 1e3:.1f} ms')
before = {l.split()[0]: list(map(int, l.split()[1:])) for l in open(sys.argv[1])}
after = {l.split()[0]: list(map(int, l.split()[1:])) for l in open(sys.argv[2])}
for cpu in before:
    d = [a - b for a, b in zip(after[cpu], before[cpu])]
    total = sum(d[:8]) or 1
    parts.append(f"{cpu} usr {d[0] / total:.2f} sys {d[2] / total:.2f} soft {d[6] / total:.2f} idle {d[3] / total:.2f} steal {d[7] / total:.3f}")
print(sys.argv[3] + ": " + "; ".join(parts))
PY
}

paced_send() {  # paced_send NAME RATE SECONDS: the emulator's two streams at RATE per port from cores 14 and 15,
  # with /proc/stat snapshots of the receive and sending cores before and after
  grep -E '^cpu(2|8|14|15) ' /proc/stat > "$out/$1-stat-before.txt"
  "$pack/bin/sluice-emulator" "$pack/configs/dual_port.yaml" --set "emulator.rate=$2" --set emulator.sample_rate=750Msps \
    --set "emulator.duration=${3}s" --cpu 14 --cpu 15 -q 2> "$out/$1-emulator.log"
  grep -E '^cpu(2|8|14|15) ' /proc/stat > "$out/$1-stat-after.txt"
}

udp_bound() {  # udp_bound PID PORT...: until every PORT has a bound UDP socket (60 s at most, or until PID has
  # ended), then 2 s more for the stages after the sources: a datagram sent before then waits in
  # the socket, but one the full socket dropped before the stream began is not counted anywhere.
  local waited port missing
  for ((waited = 0; waited < 120; waited++)); do
    missing=0
    for port in "${@:2}"; do grep -q ":$(printf '%04X' "$port") " /proc/net/udp || missing=1; done
    [ "$missing" = 0 ] && break
    kill -0 "$1" 2> /dev/null || return
    sleep 0.5
  done
  sleep 2
}

emulator_sent() {  # emulator_sent NAME: "PACKETS GB/S" that NAME's emulator says it sent (both ports), "? 0" if it did not
  python3 - "$out/$1-emulator.log" <<'PY'
import re, sys
sent = re.search(r"sent ([0-9]+) packets .* Mpkt/s, ([0-9.]+) ([GM]B/s)", open(sys.argv[1]).read())
print(f"{sent.group(1)} {float(sent.group(2)) / (1000 if sent.group(3) == 'MB/s' else 1)}" if sent else "? 0")
PY
}

dual_run() {  # dual_run RATE SECONDS [SLUICE LABEL]: one run of the dual-port pipeline (by another build of
  # sluice, LABEL, where given); prints the table's row
  local rate=$1 seconds=$2 sluice=${3:-$pack/bin/sluice} label=${4:-pipeline}
  local name="dual-${1%%/*}-$2s${3:+-$label}"
  # Spectra are recorded at 2 × 187.5 MB/s at 2 × 3 GB/s: the device's 64 GiB disk holds about two
  # minutes of them, so every run starts from an empty capture directory (a longer soak needs a bigger disk).
  rm -rf /tmp/sluice-dual-port
  # configs/dual_port.yaml at the mission's load: 750 Msps ci16 per port, the raw tap off (raw
  # samples at 6 GB/s need an NVMe per port), the emulator started here rather than by sluice.
  local load=(--set emulator.autostart=false --set emulator.sample_rate=750Msps --set template.source.sample_rate=750Msps
              --set template.source.receive_buffer=256MiB --set template.raw.enabled=false)
  local pins=(--set lanes.port0.source.cpu=2 --set lanes.port0.link.cpu=3 --set lanes.port0.fft.cpu=4
              --set lanes.port0.record.cpu=5 --set lanes.port0.sink.cpu=6 --set lanes.port1.source.cpu=8
              --set lanes.port1.link.cpu=9 --set lanes.port1.fft.cpu=10 --set lanes.port1.record.cpu=11
              --set lanes.port1.sink.cpu=12 --set pipeline.chunk=16MiB --set pipeline.chunks=32
              --set template.fft.chunk=4MiB --set template.record.preallocate=1GiB)
  # shellcheck disable=SC2206  # DUAL_EXTRA: more --set arguments, split on spaces
  local extra=(${DUAL_EXTRA:-})
  "$sluice" run "$pack/configs/dual_port.yaml" "${load[@]}" "${pins[@]}" "${extra[@]}" --duration "$((seconds + 6))s" \
    --set pipeline.progress_interval=1s --report "$out/$name.json" 2> "$out/$name.log" > /dev/null &
  local pipeline=$!
  sleep 4  # sockets bound, plans made
  # Where every thread of the pipeline may run (a thread that shares a receive core can stall it).
  for task in /proc/$pipeline/task/*; do
    printf '%-16s %s\n' "$(cat "$task/comm")" "$(taskset -pc "${task##*/}" 2> /dev/null | sed 's/.*: //')"
  done > "$out/$name-threads.txt"
  paced_send "$name" "$rate" "$seconds"
  wait $pipeline || status=1
  detail_line "$name" "$out/$name.json"
  # shellcheck disable=SC2046  # emulator_sent's two words are two arguments
  python3 - "$out/$name.json" "$rate" "$label" $(emulator_sent "$name") <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
sent, gbps = sys.argv[4], float(sys.argv[5])
lost = lost_packets = drops = rows = 0
for lane in report["lanes"]:
    stages = lane["stages"]
    lost += stages[0]["counters"].get("lost_samples", 0)
    lost_packets += stages[0]["counters"].get("lost_packets", 0)
    drops += sum(stage.get("drops_total", 0) for stage in stages)
    rows += next((s["counters"].get("rows", 0) for s in stages if s["name"] == "fft"), 0)
print(f"{sys.argv[3]:<9}{sys.argv[2]:>9} {gbps:9.2f} {sent:>11} {lost_packets:>10} {lost:>14} {drops:>6} {rows:>10}")
PY
}

bare_run() {  # bare_run RATE SECONDS: two bare receive loops on the udp stages' cores; prints the same row
  local rate=$1 seconds=$2 name="bare-${1%%/*}-$2s"
  "$pack/bin/udp_receive_loops" --port 50100 --cpu 2 --port 50101 --cpu 8 --receive-buffer 256MiB \
    --seconds "$((seconds + 20))" --idle 1 > "$out/$name.json" 2> "$out/$name.log" &
  local loops=$!
  sleep 1
  paced_send "$name" "$rate" "$seconds"
  wait $loops || status=1
  detail_line "$name"
  # shellcheck disable=SC2046  # emulator_sent's two words are two arguments
  python3 - "$out/$name.json" "$rate" $(emulator_sent "$name") <<'PY'
import json, sys
received = json.load(open(sys.argv[1]))["packets"]
sent, gbps = sys.argv[3], float(sys.argv[4])
lost = int(sent) - received if sent != "?" else -1
print(f"{'loops':<9}{sys.argv[2]:>9} {gbps:9.2f} {sent:>11} {lost:>10} {'-':>14} {'-':>6} {'-':>10}")
PY
}

bench() {  # bench NAME [args...]: 5 repetitions, medians to the log and the screen
  local name=$1
  shift
  echo "===== $name $*" | tee -a "$out/bench.log"
  timeout 300 "$pack/bin/$name" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true "$@" \
    >> "$out/bench.log" 2>&1 || status=1
  grep -E '_median|ERROR' "$out/bench.log" | tail -4
}

for mode in "$@"; do
  case $mode in
    tests)
      # Every test binary (gpu-labelled ones run for real there; the others must pass or skip: exit 0 or
      # 77, tests/support/gtest_main.cpp) and the demo pipeline landing in GPU memory.
      for test in $pack/bin/*_test; do
        name=$(basename "$test")
        echo "===== $name" >> "$out/tests.log"
        timeout 240 "$test" >> "$out/tests.log" 2>&1 && code=0 || code=$?
        case $code in
          0) echo "PASS $name ($(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$out/tests.log") skips so far)" ;;
          77) echo "SKIP $name (every test skipped: tests.log says why)" ;;  # tests/support/gtest_main.cpp
          *) echo "FAIL $name"; status=1 ;;
        esac
      done
      grep -E '^\[       OK \] (GpuMemory|RecordGpu)' "$out/tests.log"
      grep -B2 -A12 'Failure' "$out/tests.log" | tail -40
      $pack/bin/sluice run $pack/configs/demo.yaml --duration 5s -q --report "$out/demo-report.json" \
        --plot "$out/demo-rates.svg" 2> "$out/demo.log" | tee "$out/demo-summary.txt" || status=1
      grep -E 'GPU|note' "$out/demo.log" | head -5
      # The README's demo (scripts/demo.sh): the dual-port pipeline with its emulator, then its picture.
      rm -rf /tmp/sluice-dual-port
      $pack/bin/sluice run $pack/configs/dual_port.yaml -q 2> "$out/dual-port-demo.log" | tail -14 || status=1
      grep -E 'fused|cuFFT|GPU' "$out/dual-port-demo.log" | head -4
      $pack/bin/sluice capture plot /tmp/sluice-dual-port/dual_port.sigmf-collection -o "$out/dual-port-spectra.svg" \
        || status=1
      ;;
    bench)
      # Link (through GPU memory), lane and fft benchmarks on a quiet 16-core host.
      bench link_bench
      bench lane_bench
      bench fft_bench
      ;;
    socket)
      # socket_bench: udp stage vs bare recvmmsg, and the 30 s paced no-loss run.
      bench socket_bench --benchmark_filter=VsBare
      echo "===== socket_bench paced 30 s" | tee -a "$out/bench.log"
      SLUICE_BENCH_PACED_SECONDS=30 timeout 200 $pack/bin/socket_bench --benchmark_filter=Paced >> "$out/bench.log" 2>&1 \
        || status=1
      grep -A4 'Paced' "$out/bench.log" | tail -6
      ;;
    fft)
      # fft_gpu_test / fft_gpu_kernels_test (cuFFT with LTO callbacks / with kernels against a float64
      # reference and FFTW), fft_reference_test, fft_gpu_bench (stage vs bare cufftExecC2C; ci16 power_db
      # vs a device-to-device copy).
      # cuFFT links LTO callbacks through libnvJitLink (dlopen): say whether this host has one.
      ls -l /usr/local/cuda*/lib64/libnvJitLink.so* 2>&1 | head -3 | tee "$out/jitlink.txt"
      ldconfig -p | grep -i jitlink | tee -a "$out/jitlink.txt"
      for test in fft_gpu_test fft_gpu_kernels_test fft_reference_test; do
        echo "===== $test" >> "$out/tests.log"
        if timeout 300 "$pack/bin/$test" >> "$out/tests.log" 2>&1; then echo "PASS $test"; else echo "FAIL $test"; status=1; fi
      done
      grep -E '^\[ +(OK|FAILED|SKIPPED) +\] FftBackend' "$out/tests.log"
      grep -B2 -A8 'Failure' "$out/tests.log" | tail -30
      bench fft_gpu_bench
      grep -E 'BM_.*(ratio|GBps)' "$out/bench.log" | grep -v _mean | tail -12
      ;;
    suite)
      # `sluice bench` (each stage alone, one lane, two lanes, each next to its ceiling) three times;
      # the figures are the medians of the three (SUITE_SECONDS each, default 40). SUITE_VOLUMES=N:
      # on N ext4 volumes of SUITE_VOLUME_SIZE (16G) over /dev/shm (volumes.sh), one --dir each.
      dirs=()
      if [ -n "${SUITE_VOLUMES:-}" ]; then
        mapfile -t mounts < <(bash "$pack/volumes.sh" make "$SUITE_VOLUMES" "${SUITE_VOLUME_SIZE:-16G}" ext4 /dev/shm/sluice-suite)
        for mount in "${mounts[@]}"; do dirs+=(--dir "$mount"); done
      fi
      for run in 1 2 3; do
        "$pack/bin/sluice" bench --seconds "${SUITE_SECONDS:-40}" --json "${dirs[@]}" > "$out/suite-$run.json" 2>> "$out/suite.log" \
          || { status=1; tail -5 "$out/suite.log"; }
      done
      [ -z "${SUITE_VOLUMES:-}" ] || bash "$pack/volumes.sh" remove /dev/shm/sluice-suite || status=1
      python3 - "$out"/suite-[123].json <<'PY' | tee "$out/suite-table.txt"
import json, statistics, sys
runs = [json.load(open(path)) for path in sys.argv[1:]]
print(f"{'stage':<30}{'GB/s':>9}{'Msamp/s':>10}{'kpkt/s':>9}{'CPU s/GB':>9}  {'ceiling':<36}{'GB/s':>9}{'ratio':>7}  ratios")
for i, row in enumerate(runs[0]["rows"]):
    rows = [run["rows"][i] for run in runs]
    med = lambda f: statistics.median(f(r) for r in rows)
    print(f"{row['stage']:<30}{med(lambda r: r['measured']['gb_per_second']):9.3f}"
          f"{med(lambda r: r['measured']['msamples_per_second']):10.1f}{med(lambda r: r['measured']['packets_per_second']) / 1e3:9.0f}"
          f"{med(lambda r: r['measured']['cpu_seconds_per_gb']):9.2f}  {row['ceiling_name']:<36}"
          f"{med(lambda r: r['ceiling']['gb_per_second']):9.3f}{med(lambda r: r['ratio']):7.2f}  "
          + " ".join(f"{r['ratio']:.2f}" for r in rows))
print("two-lane scaling:", " ".join(f"{run['two_lane_scaling']:.2f}" for run in runs),
      f"median {statistics.median(run['two_lane_scaling'] for run in runs):.2f}")
for note in runs[0]["notes"] + [f"{r['stage']}: {r['note']}" for r in runs[0]["rows"] if r["note"]]:
    print("note:", note)
PY
      ;;
    fftw)
      # fft_bench's FftwThreads cases: the FFTW stage (and its backend alone) on 2, 4, 8 threads against one
      # and against as many bare fftwf_execute loops on the same cores; prints scaling and ratios (medians
      # of 5) last. FFTW_FILTER and FFTW_REPETITIONS narrow it (FFTW_FILTER=FftwThreads/power_db/1024/2/).
      echo "===== fft_bench FftwThreads" | tee -a "$out/bench.log"
      lscpu | grep -E '^(Model name|Thread|Core|Socket|NUMA node)' | tee -a "$out/bench.log"
      lscpu -e=CPU,CORE,SOCKET >> "$out/bench.log"  # which cores N threads on cpus 0 … N−1 land on (siblings?)
      timeout 540 "$pack/bin/fft_bench" --benchmark_filter="${FFTW_FILTER:-FftwThreads}" \
        --benchmark_repetitions="${FFTW_REPETITIONS:-5}" \
        --benchmark_report_aggregates_only=true --benchmark_out="$out/fftw-threads.json" --benchmark_out_format=json \
        >> "$out/bench.log" 2>&1 || status=1
      python3 - "$out/fftw-threads.json" <<'PY' | tee "$out/fftw-threads.txt"
import json, sys
medians = [b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("aggregate_name") == "median"]
print(f"{'output/size/N/average':<24}{'stage 1':>9}{'stage N':>9}{'scaling':>8}{'bare 1':>9}{'bare N':>9}"
      f"{'bare sc.':>9}{'ratio N':>8}{'backend 1':>10}{'backend N':>10}{'backend sc.':>12}{'bk ratio N':>11}")
for b in medians:  # Msps; scalings and ratios are ratios of the medians
    name = b["run_name"].removeprefix("BM_FftwThreads/").split("/iterations")[0]
    print(f"{name:<24}{b['stage_1_Msps']:9.0f}{b['stage_N_Msps']:9.0f}{b['stage_N_Msps'] / b['stage_1_Msps']:8.2f}"
          f"{b['bare_1_Msps']:9.0f}{b['bare_N_Msps']:9.0f}{b['bare_N_Msps'] / b['bare_1_Msps']:9.2f}"
          f"{b['stage_N_Msps'] / b['bare_N_Msps']:8.2f}{b['backend_1_Msps']:10.0f}{b['backend_N_Msps']:10.0f}"
          f"{b['backend_N_Msps'] / b['backend_1_Msps']:12.2f}{b['backend_N_Msps'] / b['bare_N_Msps']:11.2f}")
PY
      ;;
    dual)
      # configs/dual_port.yaml (2 emulator streams → udp → link → cuFFT → record → null, every thread pinned)
      # at 2 × 3 GB/s for DUAL_SECONDS (30); then, rate by rate (DUAL_RATES, 10 s each), that pipeline and two
      # bare receive loops on the same cores (udp_receive_loops), until each loses; prints both highest
      # lossless rates, their ratio and, at each rate both ran, their receive cores' busy shares last
      # (DUAL_BEFORE=path/to/other/sluice: that build too, labelled before)
      table="$out/dual-table.txt"
      df -h /tmp | tail -1 > "$out/dual-detail.txt"
      printf '%-9s%9s %9s %11s %10s %14s %6s %10s\n' receiver rate 'GB/s' sent_pkts lost_pkts lost_samples drops fft_rows \
        > "$table"
      dual_run 3GB/s "${DUAL_SECONDS:-30}" >> "$table"
      # Rate by rate (GB/s per port), the bare loops and the pipeline alternate, same emulator and
      # cores, 10 s each, until each has lost a packet or the emulator falls short of the rate asked
      # (it sends from cores 14 and 15: sender-bound). Lossless means 0 lost packets and 0 drops.
      # DUAL_BEFORE: another build of sluice (an A/B of a change), run after the pipeline at each
      # rate, labelled "before".
      best_pipeline=none best_loops=none best_before=none pipeline_done=0 loops_done=0 before_done=0
      receivers="loops pipeline${DUAL_BEFORE:+ before}"
      for rate in ${DUAL_RATES:-3.25 3.5 3.75 4 4.25 4.5 5 5.5 6}; do
        for receiver in $receivers; do
          done_var=${receiver}_done
          [ "${!done_var}" = 0 ] || continue
          case $receiver in
            loops) row=$(bare_run "${rate}GB/s" 10) ;;
            pipeline) row=$(dual_run "${rate}GB/s" 10) ;;
            before) row=$(dual_run "${rate}GB/s" 10 "$DUAL_BEFORE" before) ;;
          esac
          echo "$row" >> "$table"
          # columns: receiver rate GB/s sent_pkts lost_pkts lost_samples drops fft_rows (the GB/s sent is both ports')
          verdict=$(echo "$row" | awk -v want="$rate" '{ drops = ($7 == "-") ? 0 : $7 }
            { if ($5 != 0 || drops != 0) print "lost"; else if ($3 < 0.97 * 2 * want) print "sender"; else print "ok" }')
          case $verdict in
            ok) printf -v "best_$receiver" '%s' "$rate" ;;
            sender) printf -v "$done_var" 1; echo "# $receiver at $rate GB/s per port: the emulator fell short (sender-bound)" >> "$table" ;;
            *) printf -v "$done_var" 1 ;;
          esac
        done
        [ "$pipeline_done$loops_done" = 11 ] && { [ -z "${DUAL_BEFORE:-}" ] || [ "$before_done" = 1 ]; } && break
      done
      dual_run 0 5 >> "$table"  # unpaced: what the two emulator threads offer
      grep -h -E 'note|cuFFT|FFTW' "$out"/dual-*.log | sort -u | head -4
      {
        echo "highest lossless paced rate per port, 10 s runs: pipeline $best_pipeline GB/s, bare loops $best_loops GB/s${DUAL_BEFORE:+, before $best_before GB/s}"
        if [[ $best_pipeline != none && $best_loops != none ]]; then
          awk -v p="$best_pipeline" -v l="$best_loops" 'BEGIN { printf "ratio pipeline / bare loops: %.2f\n", p / l }'
        fi
        # Where both ran at one rate, what the receive cores (2 and 8) spent: the loops'
        # limit may lie beyond what the emulator can send, their cost per byte does not.
        python3 - "$out/dual-detail.txt" <<'PY'
import re, sys
busy = {}
for line in open(sys.argv[1]):
    m = re.match(r"(bare|dual)-([0-9.]+)GB-10s: (.*)", line)
    if m:
        idle = [float(x) for x in re.findall(r"cpu(?:2|8) usr \S+ sys \S+ soft \S+ idle (\S+)", m.group(3))]
        busy.setdefault(m.group(2), {})[m.group(1)] = 1 - sum(idle) / len(idle)
for rate, both in busy.items():
    if len(both) == 2:
        print(f"receive cores busy at {rate} GB/s per port: bare loops {both['bare']:.2f}, pipeline {both['dual']:.2f} "
              f"(the pipeline's core time per byte {both['dual'] / both['bare']:.2f}x the loops')")
PY
      } >> "$table"
      cat "$out/dual-detail.txt" "$table"
      ;;
    soak)
      # The dual-port pipeline at 2 × 3 GB/s for SOAK_SECONDS (600), every stage's counts printed
      # for reconciliation. Spectra are averaged over 128 frames instead of 16 so that ten minutes
      # of them (2 × 23 MB/s) fit the host's 64 GiB disk; every frame is still transformed. The
      # kernel's own drop counters (UDP receive buffer errors, softnet backlog drops) are read
      # before and after, so a loss the stage did not see would still show.
      table="$out/soak-table.txt"
      printf '%-9s%9s %9s %11s %10s %14s %6s %10s\n' receiver rate 'GB/s' sent_pkts lost_pkts lost_samples drops fft_rows \
        > "$table"
      grep '^Udp:' /proc/net/snmp > "$out/snmp-before.txt"
      cp /proc/net/softnet_stat "$out/softnet-before.txt"
      DUAL_EXTRA="--set template.fft.average=128" dual_run 3GB/s "${SOAK_SECONDS:-600}" >> "$table"
      grep '^Udp:' /proc/net/snmp > "$out/snmp-after.txt"
      cp /proc/net/softnet_stat "$out/softnet-after.txt"
      cat "$out/dual-detail.txt" "$table"
      python3 - "$out/dual-3GB-${SOAK_SECONDS:-600}s.json" "$out" <<'PY'
import json, sys
for lane in json.load(open(sys.argv[1]))["lanes"]:
    for s in lane["stages"]:
        print(f'{lane["name"]:6} {s["name"]:7} in {s["in"]["samples"]:>14} out {s["out"]["samples"]:>14} '
              f'drops {s.get("drops_total", 0):>6} busy {s["busy_fraction_flowing"]:.3f} '
              f'pool waits {s["pool_waits"]["count"]} (longest {s["pool_waits"]["longest_seconds"] * 1e3:.1f} ms) ' +
              " ".join(f"{k}={v}" for k, v in s["counters"].items() if v))
report = json.load(open(sys.argv[1]))
names = [lane["name"] for lane in report["lanes"]]
grew = []  # when each lane's lost count grew, from the report's timeline (about 4 points a second)
start = [{"lost_samples": [0] * len(names)}]
for before, now in zip(start + report["timeline"], report["timeline"]):
    for lane, name in enumerate(names):
        lost_now, lost_before = now.get("lost_samples", [0] * len(names))[lane], before.get("lost_samples", [0] * len(names))[lane]
        if lost_now > lost_before:
            grew.append(f"{name} {now['seconds']:.1f} s +{lost_now - lost_before}")
print("losses over time:", ", ".join(grew) if grew else "none")
def udp(path):
    names, values = (line.split()[1:] for line in open(path))
    return dict(zip(names, map(int, values)))
def softnet_dropped(path):  # second column, hex, one row per CPU
    return sum(int(line.split()[1], 16) for line in open(path))
before, after = udp(f"{sys.argv[2]}/snmp-before.txt"), udp(f"{sys.argv[2]}/snmp-after.txt")
print("kernel, during the run: " + ", ".join(f"Udp {k} +{after[k] - before[k]}" for k in ("InDatagrams", "RcvbufErrors", "InErrors")) +
      f", softnet dropped +{softnet_dropped(sys.argv[2] + '/softnet-after.txt') - softnet_dropped(sys.argv[2] + '/softnet-before.txt')}")
PY
      ;;
    soak-start)
      # The soak in a session of its own, detached from this command (one command may run 600 s at most
      # there, and a 600 s soak takes 610 s); returns at once. Collect it with soak-wait while the machine
      # is still held.
      # A copy of the pack, so that a new command's tree cannot change the script under the soak;
      # every inherited descriptor is closed, so nothing of this command waits on the soak.
      rm -rf "$soak_dir" && mkdir -p "$soak_dir/out" && cp -r "$pack" "$soak_dir/pack"
      python3 - "$soak_dir" <<'PY'
import os, subprocess, sys
where = sys.argv[1]
log = open(f"{where}/console.log", "w")
child = subprocess.Popen(["bash", f"{where}/pack/run.sh", "soak"], cwd=where, env=dict(os.environ, OUT=f"{where}/out"),
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True)
open(f"{where}/pid", "w").write(str(child.pid))
PY
      echo "soak started at $(date -u +%T), pid $(cat "$soak_dir/pid"), in $soak_dir; collect it with run.sh soak-wait"
      ;;
    soak-wait)
      # Waits for the soak (SOAK_WAIT seconds, default 580), then prints its table and copies its files
      # under $OUT; call it again if it is still running.
      [ -f "$soak_dir/pid" ] || { echo "no soak was started on this machine ($soak_dir/pid is missing)"; status=1; continue; }
      for _ in $(seq 1 "${SOAK_WAIT:-580}"); do
        kill -0 "$(cat "$soak_dir/pid")" 2> /dev/null || break
        sleep 1
      done
      if kill -0 "$(cat "$soak_dir/pid")" 2> /dev/null; then
        echo "the soak is still running at $(date -u +%T); call soak-wait again"
        status=3
      fi
      tail -30 "$soak_dir/console.log"
      cp -r "$soak_dir/out/." "$out/"
      ;;
    *)
      # A mode of its own file: scripts/device/modes/MODE.sh, sourced here (it sees $pack, $out
      # and the functions above, and sets status=1 when a check fails).
      if [ -f "$pack/modes/$mode.sh" ]; then
        # shellcheck disable=SC1090 # the mode's own file
        source "$pack/modes/$mode.sh"
      else
        echo "unknown mode $mode"; status=2
      fi
      ;;
  esac
done
exit $status
