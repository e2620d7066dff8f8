# shellcheck disable=SC2154,SC2034 # $pack, $out, $mode and status belong to run.sh, which sources this
# lanes: issue 24's multi-lane ladder on a multi-GPU host, in sub-modes that each fit one 600 s
# command (`lanes` runs ladder, soak and onegpu: longer than one command at full size):
#   lanes-ladder   LANES lanes of udp → link (device) → fft (cuFFT fused, power dB) → record spectra
#                  → null, lane K on GPU K % GPUS; per-lane rates LADDER_RATES (GB/s, 10 s each) up
#                  to the first loss, each next to LANES bare receive loops on the same cores
#   lanes-soak     SOAK_LANES_SECONDS (30) at GOAL_RATE (5 GB/s per lane): counts reconciled stage
#                  to stage, the emulator's samples against the sources', spectra against the tone;
#                  LANES_SOAKS (1) soaks in a row, named soak-1 … where more than one
#   lanes-onegpu   what the GPUs past the first add: the soak with every lane on GPU 0, then on GPUS
#                  GPUs, in one call; per GPU and run the H2D bytes and rate (nvidia-smi dmon's PCIe
#                  receive counter), the copy-engine busy share (that rate against the GPU's own
#                  host-to-device copy rate, timed first by gpu_stream_test on each GPU: NVML has no
#                  copy-engine counter), the SM busy share (dmon's sm: time a kernel ran) and, where
#                  the driver has GPM (Hopper), the share of SMs busy
#   lanes-cores    CORES_LANES lanes (as many as fit one core per stage: (cores - 2) / 6, a multiple
#                  of GPUS) at CORES_RATE (GOAL_RATE) for CORES_SECONDS (10) in each light-core
#                  layout of CORES_LAYOUTS ("stage 1 2"): the light stages on a core each, on one
#                  core per lane, on a two-core set per pair of lanes; receive cores one each
#                  throughout; the light cores' busy shares and each stage's busy fraction
#   lanes-pcp      soaks taking turns, LANES_PCP_ROUNDS (2) each: the kernel's own per-core page
#                  lists, then larger ones (vm.percpu_pagelist_high_fraction = LANES_PCP_FRACTION, 8)
#   lanes-rc       LANES_RC_ROUNDS (3) rounds of the pipeline and then the bare loops on the same
#                  cores at GOAL_RATE (4 here: a rate the emulator sends both), 10 s each: the receive
#                  cores' work a packet (busy less spin, over the send) each run, and the ratio of
#                  the medians; every run's figure is also in lanes-work.txt
#   lanes-hog      LANES_HOG_ROUNDS (2) rounds of the bare loops at GOAL_RATE, 10 s, alone and then
#                  beside a memory-bound copy (dd from /dev/zero, 256 MiB blocks) on each lane's
#                  placing core: what the lanes' own memory traffic costs a loop's receive core
#   lanes-busy     LANES_BUSY_ROUNDS (2) rounds of the bare loops at GOAL_RATE, 10 s, alone and then
#                  beside a CPU loop (no memory traffic) on every core past the receive cores that
#                  no sender and not the probe takes: whether the hypervisor steals more from the
#                  receive cores (lanes-steal.txt) when the VM keeps more of its vCPUs busy
#   lanes-handoff  LANES_HANDOFF_ROUNDS (2) rounds at GOAL_RATE (4), 10 s each, of the bare loops,
#                  then the udp stage's receive thread with a thread on each placing core that takes
#                  its batches and gives them back (pass), loads every line first (read) or copies
#                  them into a chunk with streamed stores (copy), then the pipeline (LANES_SPLIT=2):
#                  what each part of the placing thread's work costs the receive core, a packet
#   lanes-ab       LANES_AB_ROUNDS (2) rounds at GOAL_RATE (4), 10 s each, of the bare loops, the
#                  pipeline from another build (LANES_AB_BIN: a directory with its sluice and
#                  udp_receive_loops) and the pipeline from this pack, on the same cores: a change's
#                  effect on the receive cores' work a packet, against the build before it, in one
#                  call; LANES_AB_STEP (pass, read or copy; LANES_SPLIT=2) times that handoff step of
#                  each build's udp_receive_loops too
#   lanes-standby  LANES_STANDBY_ROUNDS (2) rounds of two soaks at GOAL_RATE (SOAK_LANES_SECONDS),
#                  taking turns: one receive thread a lane (standby-off-R), then a second standing by
#                  on the lane's light set (LANES_STANDBY=1, standby-on-R), the order swapped every
#                  other round; with LANES_STANDBY_HOG_CPUS (a space-separated list of cores) a
#                  memory-bound copy (dd from /dev/zero, 256 MiB blocks) runs over and over on each of
#                  them through every soak, standing in for a neighbour that loads the host's memory
#   lanes-membw    the kernel clearing 256 MiB buffers (dd) on 1, 2, 4 … cores at once: the host's
#                  memory write rate (lanes-membw.txt)
#   lanes-topology each core's hyperthread siblings and NUMA node (sysfs), its role in this layout,
#                  and a LANES_SENDER_CPUS that keeps the sender threads off the siblings of the
#                  receive and placing cores where the host has cores to spare; the CPU's model and
#                  caches (lscpu); a cache line's round trip between every pair of cores and the
#                  groups of cores that share a cache (core_pairs: lanes-core-pairs.txt and .json)
# Every pipeline run samples its sockets' queues (/proc/net/udp, every 0.25 s) into NAME-queues.txt
# and adds a line to lanes-queues.txt: per lane the deepest queue, when, time spent deep, drops;
# and every core's /proc/stat line each 0.5 s into NAME-cores.txt; and a line to
# lanes-core-waits.txt: per lane how long its receive and placing threads were kept off their
# cores (the report's threads: run delay, most in one 0.1 s window, preemptions); and one to
# lanes-vmstat.txt: the page allocator's counts over the run (/proc/vmstat before and after); and
# one to lanes-receive.txt: per lane its receive threads' work a datagram (the report's
# receive_ns_per_datagram), the datagrams a kernel message (packets over received_messages: GRO's
# merge factor), with LANES_STANDBY what each standby thread received and how often it was woken,
# and the lanes the report names as slower than the run's median; and the interrupts
# each receive core took over the send (/proc/interrupts before and after: the kernel here may not
# account interrupt time apart, so /proc/stat shows it as the interrupted thread's), naming the
# sources on a core that took more than ten times the receive cores' median.
# Every run (pipeline or loops) adds a line to lanes-steal.txt: the share of the receive cores' time
# (mean, most) and of every core's that the hypervisor stole over the send (/proc/stat's steal: a
# vCPU ready to run while the host ran other work; the lent hosts are VMs), and each ratio of
# lanes-rc, lanes-handoff and lanes-ab names the steal of each round's runs beside it.
# Each run also times a memory-bound copy on a core no lane uses (LANES_PROBE_CPU, the host's last):
# dd from /dev/zero through a 256 MiB buffer each 0.5 s into NAME-probe.txt, and its rates over the
# run (least, median, most) as a line in lanes-probe.txt, beside the same probe alone for 5 s
# ("idle") and during the bare loops' runs: a slowdown of the whole machine's memory shows there,
# where a lane's own slowdown does not. LANES_PROBE_CPU=off leaves the probe out (its core free for
# a layout that needs every core).
# Before its first run a sub-mode warms the kernel's memory where the kernel initialises it lazily
# (deferred_init=lazy, as in the lent microVMs: a few GB initialised at boot, the rest as it is first
# asked for): it fills LANES_WARM_GIB (120; at most 0.8 of /dev/shm's room and of MemAvailable) GiB of /dev/shm with fallocate and frees it, timed, so
# that no run pays for the kernel's initialisation of the pages its sockets take; 0 skips it, and so
# does a kernel that has initialised that much already.
# LANES_PCP_FRACTION sets vm.percpu_pagelist_high_fraction first (8 and up: larger per-core page
# lists, fewer trips to the zone's lock; 0: the kernel's own sizing), to try whether the loopback's
# page traffic (allocated on the senders' cores, freed on the receivers') holds the lanes back.
# LANES=16 GPUS=4 runs them on a 64-core four-GPU host.
# Cores: 0-1 left to the system; receive threads on 2.., one each; then the light stages (link,
# fft, record, null) by LANES_LIGHT_CORES: 2 (default) each pair of lanes sharing a two-core set
# (`cpu: "a,b"`), 1 one core per lane, stage one core per stage; then one emulator sender thread
# per stream. 8 lanes fit 32 cores (26 used), 16 lanes 64 (50).
# LANES_SPLIT=1: every udp stage with receive_thread: true, its receive thread alone on the lane's
# receive core (receive_cpu) and its own thread, which checks, accounts and copies into chunks (the
# placing thread), on the lane's light-core set (its link's cores) beside the light stages, which
# keep those cores 0.15 busy or less: no more cores than without the split. Rows say "split".
# LANES_SPLIT=2: each placing thread alone on a core of its own (after the receive cores), every
# lane's light stages on one two-core set: 8 lanes take 28 cores. Rows say "split2". With
# LANES_LIGHT_SETS=N the light stages take N two-core sets, lane K on set K % N (8 lanes, N=2: 30).
# RECEIVE_SPIN_US (with LANES_SPLIT): each receive thread polls an empty socket that many µs before
# it sleeps (receive_spin), and the bare loops the same (--spin); the receive cores' busy column is
# then their busy share less the time spent spinning (the report's receive_thread_spin_ns, the
# loops' spin_ns). Rows say "spin".
# LANES_RX_THREADS (1; with LANES_SPLIT=2): receive threads a lane (receive_threads), the extra
# ones on the next lanes' receive cores, so that a lane that falls behind borrows a neighbour's
# slack instead of a core of its own (without RECEIVE_SPIN_US: two threads that poll one core
# take it from each other).
# LANES_STANDBY=1 (with LANES_SPLIT=2): each lane's udp stage gets a second receive thread that
# stands by (receive_standby: 1) on a core of its lane's light set, the lanes of a set taking its
# two cores in turn (LANES_STANDBY_CPUS, a space-separated list: lane K's on its K % n-th core
# instead): it receives only while the socket's queue is past receive_standby_above (the
# stage's default; LANES_EXTRA may set it), until it finds the socket empty. Rows say "standby".
# Settings: LANES (8), GPUS (2), LANES_SPLIT (0), LADDER_RATES ("4 4.5 5 5.5 6"), GOAL_RATE (5), SOAK_LANES_SECONDS,
# SENDER_THREADS (the emulator's threads_per_stream, each on a sender core of its own: 8 lanes
# with 2 need 34 cores), LANES_SENDER_CPUS (the sender threads' cores, a space-separated list, in
# place of the cores after the light ones; `lanes-topology` prints a list that keeps them off the
# hyperthread siblings of the receive and placing cores),
# EMULATOR_EXTRA and LANES_EXTRA (more --set
# arguments for the emulator and for sluice), LANES_FFT (cufft; fftw runs without a GPU, with
# GPUS=0 and no gpu: keys), LANES_LIGHT_CORES, LANES_AVERAGE (128 spectra a row: 8 lanes at
# 5 GB/s record 0.3 GB/s of spectra, 30 s fit the disk), LANES_HOST_CORES (the host's cores: nproc).
# LANES_DRY_RUN=1 runs nothing: it writes every config the mode would run, validates each with
# `sluice validate` (on a host with fewer GPUs than GPUS, a copy without its gpu: keys) and prints
# the commands, e.g. here: LANES_DRY_RUN=1 LANES_HOST_CORES=32 bash run.sh lanes-onegpu lanes-cores.
# Needs sluice, sluice-emulator, udp_receive_loops and (lanes-onegpu) gpu_stream_test packed.
# Without a GPU, on two cores:
#   LANES=2 GPUS=0 LANES_FFT=fftw LANES_LIGHT_CORES=1 LADDER_RATES="0.05 0.1" GOAL_RATE=0.05 ...
lanes_count=${LANES:-8}
lanes_gpus=${GPUS:-2}
lanes_fft=${LANES_FFT:-cufft}
lanes_light=${LANES_LIGHT_CORES:-2}
lanes_host_cores=${LANES_HOST_CORES:-$(nproc)}
lanes_dry=${LANES_DRY_RUN:-0}
lanes_pcp_set() {  # lanes_pcp_set FRACTION: vm.percpu_pagelist_high_fraction (not in a dry run)
  [ "$lanes_dry" = 1 ] && return
  if ! echo "$1" 2> /dev/null > /proc/sys/vm/percpu_pagelist_high_fraction; then
    echo "lanes: cannot set vm.percpu_pagelist_high_fraction to $1: the runs after this compare nothing" >&2
    status=1
  fi
}
if [ -n "${LANES_PCP_FRACTION:-}" ] && [ "$lanes_dry" != 1 ]; then
  lanes_pcp_set "$LANES_PCP_FRACTION"
  echo "lanes: vm.percpu_pagelist_high_fraction = $(cat /proc/sys/vm/percpu_pagelist_high_fraction)"
fi
lanes_bin=$pack/bin  # sluice and udp_receive_loops; lanes-ab switches it to LANES_AB_BIN and back
lanes_split=${LANES_SPLIT:-0}
lanes_spin_us=${RECEIVE_SPIN_US:-0}
lanes_light_sets=${LANES_LIGHT_SETS:-1}
if [ "$lanes_spin_us" != 0 ] && [ "$lanes_split" = 0 ]; then
  echo "lanes: RECEIVE_SPIN_US needs the udp stages' receive threads: set LANES_SPLIT=1 or 2" >&2
  exit 2
fi
lanes_dir=/tmp/sluice-lanes
lanes_rows=()
lanes_gpu_rows=()
lanes_cores_rows=()
lanes_work_rows=()
lanes_light_stages=(link fft record sink)
lanes_average=${LANES_AVERAGE:-128}
# nvidia-smi numbers GPUs in PCI bus order: so do sluice's gpu: and gpu_stream_test here.
export CUDA_DEVICE_ORDER=PCI_BUS_ID

# Core numbers wrap at the host's count, so that a tiny run (LANES=2 on a 2-core machine) still
# pins; on a host with enough cores they are as laid out above.
lanes_core() { echo $(($1 % lanes_host_cores)); }
lanes_probe_cpu=${LANES_PROBE_CPU:-$((lanes_host_cores - 1))}

lanes_warm() {  # where the kernel has not yet initialised most of its memory, fill and free tmpfs
  [ "$lanes_dry" = 1 ] && return
  local gib=${LANES_WARM_GIB:-120} before after start room memory
  before=$(lanes_managed_gib)
  room=$(($(df --output=avail -BG /dev/shm | tail -1 | tr -dc 0-9) * 8 / 10))
  memory=$(awk '/MemAvailable/ {print int($2 / 1048576 * 0.8)}' /proc/meminfo)
  gib=$((gib < room ? gib : room))
  gib=$((gib < memory ? gib : memory))
  if [ "$gib" = 0 ] || ! grep -q 'deferred_init=lazy' /proc/cmdline || [ "${before%%.*}" -ge "$gib" ]; then
    echo "warm-up: none (LANES_WARM_GIB=${LANES_WARM_GIB:-120}, room for $gib; kernel command line $(grep -o 'deferred_init=[a-z]*' /proc/cmdline || echo 'without deferred_init')); $before" >> "$out/lanes-warm.txt"
    return
  fi
  start=$(date +%s.%N)
  if fallocate -l "${gib}G" /dev/shm/lanes-warm; then
    rm -f /dev/shm/lanes-warm
    after=$(lanes_managed_gib)
    echo "warm-up: $gib GiB through /dev/shm in $(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s; before: $before; after: $after" >> "$out/lanes-warm.txt"
  else
    rm -f /dev/shm/lanes-warm
    echo "lanes: the warm-up could not fill $gib GiB of /dev/shm (set LANES_WARM_GIB lower)" | tee -a "$out/lanes-warm.txt" >&2
    status=1
  fi
}

lanes_probe_idle() {  # the copy probe for 5 s with no run: the rate the runs' probes compare with
  [ "$lanes_dry" = 1 ] && return
  lanes_copy_probe "$out/idle-probe.txt" &
  local probe=$!
  sleep 5
  kill $probe 2> /dev/null
  lanes_probe_summary idle >> "$out/lanes-probe.txt"
}

lanes_managed_gib() {  # the Normal zones' pages the kernel has initialised, against those present
  awk '/zone +Normal/ {n = 1} /zone +(DMA|DMA32|Movable|Device)/ {n = 0}
       n && $1 == "present" {p += $2} n && $1 == "managed" {m += $2}
       END {printf "%.1f of %.1f GiB initialised", m * 4096 / 2^30, p * 4096 / 2^30}' /proc/zoneinfo
}

lanes_copy_probe() {  # lanes_copy_probe FILE: a memory-bound copy's rate on the probe core, each 0.5 s
  [ "$lanes_probe_cpu" = off ] && return
  while :; do
    echo "$(date +%s.%N) $(taskset -c "$lanes_probe_cpu" dd if=/dev/zero of=/dev/null bs=256M count=4 2>&1 | tail -1)"
    sleep 0.5
  done > "$1"
}

lanes_probe_summary() {  # lanes_probe_summary NAME: the probe's rates over the run
  [ "$lanes_probe_cpu" = off ] && return
  python3 - "$out/$1-probe.txt" "$1" "$lanes_probe_cpu" <<'PY'
import re, statistics, sys
rates = []
for line in open(sys.argv[1]):
    m = re.search(r"copied, [0-9.e-]+ s, ([0-9.]+) ([GM])B/s", line)
    if m:
        rates.append(float(m.group(1)) / (1 if m.group(2) == "G" else 1000))
if rates:
    print(f"{sys.argv[2]}: memory copy on core {sys.argv[3]} (dd /dev/zero, 256 MiB blocks), {len(rates)} samples: "
          f"least {min(rates):.2f}, median {statistics.median(rates):.2f}, most {max(rates):.2f} GB/s")
else:
    print(f"{sys.argv[2]}: no copy-probe samples")
PY
}
lanes_rx_cpu() { lanes_core $((2 + $1)); }
lanes_rx_cores() {  # every lane's receive core, in lane order
  local lane
  for ((lane = 0; lane < lanes_count; lane++)); do lanes_rx_cpu "$lane"; done
}
lanes_placers() {  # cores the placing threads take on their own (LANES_SPLIT=2: one a lane)
  if [ "$lanes_split" = 2 ]; then echo "$lanes_count"; else echo 0; fi
}
lanes_placer_cpu() { lanes_core $((2 + lanes_count + $1)); }
lanes_light_first() { echo $((2 + lanes_count + $(lanes_placers))); }
lanes_light_total() {  # cores the light stages of every lane take
  [ "$lanes_split" = 2 ] && { echo $((2 * lanes_light_sets)); return; }  # two-core sets shared by the lanes
  case $lanes_light in
    stage) echo $((4 * lanes_count)) ;;
    1) echo "$lanes_count" ;;
    *) echo $(((lanes_count + 1) / 2 * 2)) ;;
  esac
}
lanes_light_set_first() { echo $(($(lanes_light_first) + 2 * ($1 % lanes_light_sets))); }  # LANE (split 2): its set's first core
lanes_light_cpus() {  # lanes_light_cpus LANE STAGE: the cores of that light stage (0 link … 3 null)
  local first a b
  first=$(lanes_light_first)
  if [ "$lanes_split" = 2 ]; then  # lane K on set K % LANES_LIGHT_SETS
    first=$(lanes_light_set_first "$1")
    echo "\"$(lanes_core "$first"),$(lanes_core $((first + 1)))\""
    return
  fi
  case $lanes_light in
    stage) lanes_core $((first + 4 * $1 + $2)) ;;
    1) lanes_core $((first + $1)) ;;
    *)
      a=$(lanes_core $((first + $1 / 2 * 2)))
      b=$(lanes_core $((first + $1 / 2 * 2 + 1)))
      if [ "$a" = "$b" ]; then echo "$a"; else echo "\"$a,$b\""; fi
      ;;
  esac
}
lanes_light_list() {  # every light core, one per line
  local core
  for ((core = 0; core < $(lanes_light_total); core++)); do lanes_core $(($(lanes_light_first) + core)); done | sort -nu
}
lanes_sender_cpu() {  # sender thread K's core: the next core after the light ones, or LANES_SENDER_CPUS's Kth
  if [ -n "${LANES_SENDER_CPUS:-}" ]; then
    local cpus
    read -r -a cpus <<< "$LANES_SENDER_CPUS"
    echo "${cpus[$1 % ${#cpus[@]}]}"
    return
  fi
  lanes_core $(($(lanes_light_first) + $(lanes_light_total) + $1))
}
lanes_senders=${SENDER_THREADS:-1}
lanes_sender_cores() {  # lanes_sender_cores LANE: ", cpus: [...]", a core for each of the stream's sender threads
  [ "$lanes_senders" -gt 1 ] || return 0
  local cores=() k
  for ((k = 0; k < lanes_senders; k++)); do cores+=("$(lanes_sender_cpu $(($1 * lanes_senders + k)))"); done
  echo ", cpus: [$(IFS=,; echo "${cores[*]}")]"
}

lanes_rx_threads=${LANES_RX_THREADS:-1}
lanes_rx_cpus() {  # lanes_rx_cpus LANE: its receive core, then (LANES_RX_THREADS) the next lanes' ones
  local cores=() k
  for ((k = 0; k < lanes_rx_threads; k++)); do cores+=("$(lanes_rx_cpu $((($1 + k) % lanes_count)))"); done
  if [ "$lanes_rx_threads" = 1 ]; then echo "${cores[0]}"; else echo "[$(IFS=,; echo "${cores[*]}")], receive_threads: $lanes_rx_threads"; fi
}
lanes_standby=${LANES_STANDBY:-0}
if [ "$lanes_standby" = 1 ] && { [ "$lanes_split" != 2 ] || [ "$lanes_rx_threads" != 1 ]; }; then
  echo "lanes: LANES_STANDBY=1 needs LANES_SPLIT=2 and one receive thread a lane (LANES_RX_THREADS=1)" >&2
  exit 2
fi
lanes_standby_cpus() {  # lanes_standby_cpus LANE: its receive core and a standby thread's (LANES_STANDBY_CPUS, else its light set)
  local standby cpus
  if [ -n "${LANES_STANDBY_CPUS:-}" ]; then
    read -r -a cpus <<< "$LANES_STANDBY_CPUS"
    standby=${cpus[$1 % ${#cpus[@]}]}
  else
    standby=$(lanes_core $(($(lanes_light_set_first "$1") + ($1 / lanes_light_sets) % 2)))
  fi
  echo "[$(lanes_rx_cpu "$1"),$standby], receive_threads: 2, receive_standby: 1"
}
lanes_source_cpus() {  # lanes_source_cpus LANE: where the udp stage's threads run (LANES_SPLIT: two threads)
  local spin=""
  [ "$lanes_spin_us" != 0 ] && spin=", receive_spin: ${lanes_spin_us}us"
  if [ "$lanes_split" = 2 ] && [ "$lanes_standby" = 1 ]; then
    echo "receive_thread: true, receive_cpu: $(lanes_standby_cpus "$1"), cpu: $(lanes_placer_cpu "$1")$spin"
  elif [ "$lanes_split" = 2 ]; then
    echo "receive_thread: true, receive_cpu: $(lanes_rx_cpus "$1"), cpu: $(lanes_placer_cpu "$1")$spin"
  elif [ "$lanes_split" = 1 ]; then
    echo "receive_thread: true, receive_cpu: $(lanes_rx_cpu "$1"), cpu: $(lanes_light_cpus "$1" 0)$spin"
  else
    echo "cpu: $(lanes_rx_cpu "$1")"
  fi
}

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
      echo "    - {address: 127.0.0.1:$((50200 + lane)), stream_id: $((lane + 1))$(lanes_sender_cores "$lane")}"
    done
    [ "$lanes_senders" -gt 1 ] && echo "  threads_per_stream: $lanes_senders"
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
      echo "  - name: lane$lane"
      [ "$gpus" -gt 0 ] && echo "    gpu: $((lane % gpus))"
      echo "    source: {address: 127.0.0.1:$((50200 + lane)), stream_id: $((lane + 1)), $(lanes_source_cpus "$lane")}"
      for stage in 0 1 2 3; do echo "    ${lanes_light_stages[stage]}: {cpu: $(lanes_light_cpus "$lane" "$stage")}"; done
    done
  } > "$file"
}

lanes_send() {  # lanes_send NAME CONFIG SECONDS: every stream, one pinned sender thread each (or SENDER_THREADS)
  local cpus=() lane
  # With several sender threads a stream, the config's threads_per_stream and cpus: place them.
  if [ "$lanes_senders" = 1 ]; then
    for ((lane = 0; lane < lanes_count; lane++)); do cpus+=(--cpu "$(lanes_sender_cpu "$lane")"); done
  fi
  # shellcheck disable=SC2206  # EMULATOR_EXTRA: more --set arguments, split on spaces
  local extra=(${EMULATOR_EXTRA:-})
  cat /proc/stat > "$out/$1-stat-before.txt"
  "$pack/bin/sluice-emulator" "$2" --set "emulator.duration=${3}s" "${cpus[@]}" "${extra[@]}" -q \
    2> "$out/$1-emulator.log"
  cat /proc/stat > "$out/$1-stat-after.txt"
}

lanes_rx_busy() {  # lanes_rx_busy NAME: the receive cores' busy shares over NAME's send, "min-max", and
  # the mean of their steal (a line in lanes-steal.txt too); with
  # RECEIVE_SPIN_US, less each core's spin (from NAME.json: a report's counters or the loops' ports)
  local cores
  mapfile -t cores < <(lanes_rx_cores)
  python3 - "$out/$1-stat-before.txt" "$out/$1-stat-after.txt" "$out/$1.json" "$lanes_spin_us" "${cores[@]}" <<'PY'
import json, sys
def load(path):
    return {l.split()[0]: list(map(int, l.split()[1:9])) for l in open(path) if l.startswith("cpu") and l[3].isdigit()}
before, after = load(sys.argv[1]), load(sys.argv[2])
cores = sys.argv[5:]
report = json.load(open(sys.argv[3]))
spin = [0.0] * len(cores)
if sys.argv[4] != "0":
    if "ports" in report:
        spin = [port.get("spin_ns", 0) / 1e9 for port in report["ports"]]
    else:
        spin = [lane["stages"][0]["counters"].get("receive_thread_spin_ns", 0) / 1e9 for lane in report["lanes"]]
shares, work = [], 0.0
for index, core in enumerate(cores):
    d = [a - b for a, b in zip(after[f"cpu{core}"], before[f"cpu{core}"])]
    seconds = sum(d) / 100  # USER_HZ
    shares.append(1 - (d[3] + d[4]) / (sum(d) or 1) - (spin[index] / seconds if seconds else 0))
    work += seconds - (d[3] + d[4]) / 100 - spin[index]
packets = sum(p["packets"] for p in report["ports"]) if "ports" in report else \
    sum(lane["stages"][0]["packets"] for lane in report["lanes"])
with open(sys.argv[3].rsplit("/", 1)[0] + "/lanes-work.txt", "a") as log:  # the receive cores' work a packet
    print(sys.argv[3].rsplit("/", 1)[1][:-5], f"{work / packets * 1e6 if packets else 0:.4f}", file=log)
# The hypervisor's steal (the 8th field): time a vCPU wanted to run and the host ran something else.
def steal(names):
    deltas = [[a - b for a, b in zip(after[n], before[n])] for n in names]
    return [d[7] / (sum(d) or 1) for d in deltas]
receive, every = steal([f"cpu{core}" for core in cores]), steal(sorted(after))
with open(sys.argv[3].rsplit("/", 1)[0] + "/lanes-steal.txt", "a") as log:
    print(sys.argv[3].rsplit("/", 1)[1][:-5], f"{sum(receive) / len(receive):.4f} {max(receive):.4f}",
          f"{sum(every) / len(every):.4f}", file=log)
# The rows' last two columns: the receive cores' busy shares, and the mean of their steal.
print(f"{min(shares):.2f}-{max(shares):.2f} {sum(receive) / len(receive):>8.1%}")
PY
}

lanes_wait_bound() {  # lanes_wait_bound PID: until every lane's port is bound (run.sh's udp_bound)
  local ports=() lane
  for ((lane = 0; lane < lanes_count; lane++)); do ports+=($((50200 + lane))); done
  udp_bound "$1" "${ports[@]}"
}

lanes_queue_sampler() {  # lanes_queue_sampler FILE: every lane socket's queue (/proc/net/udp) each 0.25 s
  local first last
  first=$(printf '%04X' 50200)
  last=$(printf '%04X' $((50200 + lanes_count - 1)))
  while :; do
    echo "t $(date +%s.%N)"
    # local address, tx_queue:rx_queue (bytes charged to the socket, hex), drops
    awk -v a="$first" -v b="$last" '{ split($2, p, ":"); if (p[2] >= a && p[2] <= b) print p[2], $5, $NF }' /proc/net/udp
    sleep 0.25
  done > "$1"
}

lanes_queue_summary() {  # lanes_queue_summary NAME: per lane the deepest its socket's queue got, when, and its drops
  python3 - "$out/$1-queues.txt" "$1" <<'PY'
import sys
rows, start = [], None
for line in open(sys.argv[1]):
    part = line.split()
    if part[0] == "t":
        rows.append((float(part[1]), {}))
    elif rows and len(part) == 3:
        lane = int(part[0], 16) - 50200
        queued = int(part[1].split(":")[1], 16)
        rows[-1][1][lane] = (queued, int(part[2]))
        if queued and start is None:
            start = rows[-1][0]
start = start or (rows[0][0] if rows else 0)
lanes = sorted({lane for _, sample in rows for lane in sample})
parts = []
for lane in lanes:
    peak, when = max(((s[lane][0], t) for t, s in rows if lane in s), default=(0, start))
    deep = sum(0.25 for _, s in rows if lane in s and s[lane][0] > 64 << 20)
    drops = max((s[lane][1] for _, s in rows if lane in s), default=0)
    parts.append(f"lane{lane} {peak / 1e6:.0f} MB at {when - start:.1f} s, {deep:.1f} s over 64 MB, {drops} drops")
print(f"{sys.argv[2]}: socket queues (deepest, when after the first datagram queued, time deep, drops): " + "; ".join(parts))
PY
}

lanes_core_waits() {  # lanes_core_waits NAME: per lane its receive and placing threads' waits for their cores
  # and the hypervisor's steal on them
  python3 - "$out/$1.json" "$1" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
parts = []
for lane in report["lanes"]:
    for thread in lane["stages"][0].get("threads", []):
        parts.append(f"{lane['name']} {thread['name']} (cores {thread['cores'] or '-'}) "
                     f"{thread['core_wait_seconds'] * 1e3:.1f} ms, peak {thread['core_wait_peak_seconds'] * 1e3:.1f} ms, "
                     f"{thread['preemptions']} preemptions, stolen {thread.get('stolen_seconds', 0) * 1e3:.0f} ms")
print(f"{sys.argv[2]}: kept off their cores (in all, most in 0.1 s, preemptions, the hypervisor's steal on "
      "their cores): " + "; ".join(parts))
PY
}

lanes_receive_work() {  # lanes_receive_work NAME: per lane its receive work a datagram and datagrams a message
  python3 - "$out/$1.json" "$1" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
parts, named = [], []
for lane in report["lanes"]:
    stage = lane["stages"][0]
    work = stage.get("receive_ns_per_datagram")
    messages = stage["counters"].get("received_messages", 0)
    merged = f"{stage['packets'] / messages:.1f}" if messages else "-"
    part = f"{lane['name']} {work / 1e3:.2f} us, {merged}" if work is not None else f"{lane['name']} -, {merged}"
    if "receive_standby_raises" in stage["counters"]:  # LANES_STANDBY: what its standby thread took, in how many wakes
        part += (f", standby {stage['counters']['receive_standby_bytes'] / 1e6:.0f} MB in "
                 f"{stage['counters']['receive_standby_raises']} wakes")
    parts.append(part)
    named += [lane["name"] for note in stage.get("notes", []) if "the median of the run's" in note]
print(f"{sys.argv[2]}: receive work a datagram (CPU less spin) and datagrams a kernel message: " + "; ".join(parts) +
      (f"; named slower: {', '.join(named)}" if named else ""))
PY
}

lanes_interrupts() {  # lanes_interrupts NAME: the interrupts each receive core took over the run, and from what
  local cores
  mapfile -t cores < <(lanes_rx_cores)
  python3 - "$out/$1-interrupts-before.txt" "$out/$1-interrupts-after.txt" "$1" "${cores[@]}" <<'PY'
import statistics, sys
def load(path):
    lines = open(path).read().splitlines()
    cpus = [int(word[3:]) for word in lines[0].split()]
    counts = {}
    for line in lines[1:]:
        name, _, rest = line.partition(":")
        words = rest.split()
        values = [int(word) for word in words[:len(cpus)] if word.isdigit()]
        if len(values) == len(cpus):
            label = " ".join(words[len(cpus):]) or name.strip()
            counts[name.strip() + " " + label] = dict(zip(cpus, values))
    return counts
before, after = load(sys.argv[1]), load(sys.argv[2])
cores = [int(core) for core in sys.argv[4:]]
totals, tops = {}, {}
for core in cores:
    per_source = {key: after[key].get(core, 0) - before.get(key, {}).get(core, 0) for key in after}
    totals[core] = sum(per_source.values())
    tops[core] = sorted(per_source.items(), key=lambda item: -item[1])[:2]
typical = statistics.median(totals.values())
parts = []
for core in cores:
    text = f"core {core} {totals[core]}"
    if totals[core] > max(1000, 10 * typical):  # far above the other receive cores: name the sources
        text += " (" + ", ".join(f"{key.split()[0]} {' '.join(key.split()[-2:])} {count}" for key, count in tops[core] if count) + ")"
    parts.append(text)
print(f"{sys.argv[3]}: interrupts on the receive cores over the run (median {typical:.0f}): " + "; ".join(parts))
PY
}

lanes_vmstat_delta() {  # lanes_vmstat_delta NAME: the page allocator's counts over the run
  python3 - "$out/$1-vmstat-before.txt" "$out/$1-vmstat-after.txt" "$1" <<'PY'
import sys
def load(path):
    return {key: int(value) for key, value in (line.split() for line in open(path))}
before, after = load(sys.argv[1]), load(sys.argv[2])
keys = ["pgalloc_normal", "pgalloc_dma32", "pgfree", "pgfault", "compact_stall", "allocstall_normal",
        "pgscan_direct", "thp_fault_alloc"]
print(f"{sys.argv[3]}: over the run: " + ", ".join(f"{key} {after[key] - before[key]}" for key in keys if key in before))
PY
}

lanes_pipeline() {  # lanes_pipeline RATE SECONDS GPUS NAME LABEL: one run; prints its row, returns 1 on loss
  local rate=$1 seconds=$2 gpus=$3 name=$4 label=$5
  local config="$out/$name.yaml"
  lanes_yaml "$rate" "$gpus" "$config"
  if [ "$lanes_dry" = 1 ]; then lanes_dry_pipeline "$config" "$gpus" "$label" "$rate"; return; fi
  rm -rf "$lanes_dir"
  # shellcheck disable=SC2206  # LANES_EXTRA: more --set arguments, split on spaces
  local extra=(${LANES_EXTRA:-})
  "$lanes_bin/sluice" run "$config" "${extra[@]}" --duration "$((seconds + 8))s" --report "$out/$name.json" \
    2> "$out/$name.log" > /dev/null &
  local pipeline=$!
  lanes_wait_bound $pipeline
  local samplers=()
  if [ "$gpus" -gt 0 ] && command -v nvidia-smi > /dev/null; then
    nvidia-smi dmon -s ut -d 1 > "$out/$name-dmon.txt" 2>&1 &
    samplers+=($!)
    # GPM (Hopper on): metric 2 is the share of SMs busy; a driver without it just writes its error.
    nvidia-smi dmon --gpm-metrics 2 -d 1 > "$out/$name-gpm.txt" 2>&1 &
    samplers+=($!)
  fi
  lanes_queue_sampler "$out/$name-queues.txt" &
  samplers+=($!)
  while :; do echo "t $(date +%s.%N)"; grep '^cpu[0-9]' /proc/stat; sleep 0.5; done > "$out/$name-cores.txt" &
  samplers+=($!)
  lanes_copy_probe "$out/$name-probe.txt" &
  samplers+=($!)
  cp /proc/vmstat "$out/$name-vmstat-before.txt"
  cp /proc/interrupts "$out/$name-interrupts-before.txt"
  lanes_send "$name" "$config" "$seconds"
  cp /proc/interrupts "$out/$name-interrupts-after.txt"
  cp /proc/vmstat "$out/$name-vmstat-after.txt"
  kill "${samplers[@]}" 2> /dev/null
  wait $pipeline || status=1
  lanes_queue_summary "$name" >> "$out/lanes-queues.txt"
  lanes_core_waits "$name" >> "$out/lanes-core-waits.txt"
  lanes_receive_work "$name" >> "$out/lanes-receive.txt"
  lanes_interrupts "$name" >> "$out/lanes-receive.txt"
  lanes_vmstat_delta "$name" >> "$out/lanes-vmstat.txt"
  lanes_probe_summary "$name" >> "$out/lanes-probe.txt"
  local busy
  busy=$(lanes_rx_busy "$name")
  python3 - "$out/$name.json" "$out/$name-emulator.log" "$rate" "$lanes_count" "$busy" "$label" <<'PY'
import json, re, sys
report = json.load(open(sys.argv[1]))
sent = re.search(r"sent ([0-9]+) packets .*?([0-9.]+) ([GM])B/s; samples ([0-9]+)", open(sys.argv[2]).read())
lost = sum(lane["stages"][0]["counters"].get("lost_samples", 0) for lane in report["lanes"])
drops = sum(s.get("drops_total", 0) for lane in report["lanes"] for s in lane["stages"])
gbps = float(sent.group(2)) / (1 if sent.group(3) == "G" else 1000) if sent else 0
print(f"{sys.argv[6]:<12} {sys.argv[4]:>5} x {sys.argv[3]:>4} {gbps:>8.2f} {sent.group(1) if sent else '?':>12} "
      f"{lost:>12} {drops:>7} {sys.argv[5]:>10}")
sys.exit(1 if lost or drops or not sent else 0)
PY
}

lanes_loops() {  # lanes_loops RATE SECONDS NAME [HANDOFF]: LANES bare receive loops on the receive cores; its
  # row. HANDOFF (pass, read, copy): the udp stage's receive thread there instead, and a thread on each
  # lane's placing core taking its batches (udp_receive_loops --handoff)
  local rate=$1 seconds=$2 name=$3 handoff=${4:-none} args=() lane
  local config="$out/$name.yaml"
  lanes_yaml "$rate" 0 "$config"
  for ((lane = 0; lane < lanes_count; lane++)); do
    args+=(--port $((50200 + lane)) --cpu "$(lanes_rx_cpu "$lane")")
    [ "$handoff" != none ] && args+=(--placer-cpu "$(lanes_placer_cpu "$lane")")
  done
  [ "$handoff" != none ] && args+=(--handoff "$handoff")
  if [ "$lanes_dry" = 1 ]; then
    echo "# would run: udp_receive_loops ${args[*]} --receive-buffer 256MiB, then lanes_send $name" >&2
    printf '%-12s %5s x %4s %s\n' "$([ "$handoff" = none ] && echo loops || echo "loops $handoff")" "$lanes_count" \
      "$rate" "(dry run)"
    return
  fi
  [ "$lanes_spin_us" != 0 ] && args+=(--spin "$(awk -v us="$lanes_spin_us" 'BEGIN { print us / 1e6 }')")
  "$lanes_bin/udp_receive_loops" "${args[@]}" --receive-buffer 256MiB --seconds "$((seconds + 20))" --idle 1 \
    > "$out/$name.json" 2> "$out/$name.log" &
  local loops=$!
  sleep 1
  lanes_copy_probe "$out/$name-probe.txt" &
  local probe=$!
  lanes_send "$name" "$config" "$seconds"
  kill $probe 2> /dev/null
  lanes_probe_summary "$name" >> "$out/lanes-probe.txt"
  wait $loops || status=1
  local busy
  busy=$(lanes_rx_busy "$name")
  python3 - "$out/$name.json" "$out/$name-emulator.log" "$rate" "$lanes_count" "$busy" "$handoff" <<'PY'
import json, re, sys
received = json.load(open(sys.argv[1]))["packets"]
label = "loops" if sys.argv[6] == "none" else f"loops {sys.argv[6]}"
sent = re.search(r"sent ([0-9]+) packets .*?([0-9.]+) ([GM])B/s", open(sys.argv[2]).read())
lost = int(sent.group(1)) - received if sent else -1
gbps = float(sent.group(2)) / (1 if sent.group(3) == "G" else 1000) if sent else 0
print(f"{label:<12} {sys.argv[4]:>5} x {sys.argv[3]:>4} {gbps:>8.2f} {sent.group(1) if sent else '?':>12} "
      f"{str(lost) + ' pkts':>12} {'-':>7} {sys.argv[5]:>10}")
sys.exit(1 if lost != 0 else 0)
PY
}

lanes_check() {  # lanes_check NAME RATE: counts stage to stage and the spectra's peak at the tone, per lane
  [ "$lanes_dry" = 1 ] && return
  python3 - "$out/$1.json" "$out/$1-emulator.log" "$lanes_dir" "$2" <<'PY' | tee -a "$out/lanes-checks.txt"
import glob, json, re, sys
from array import array
report, log, directory, rate = json.load(open(sys.argv[1])), open(sys.argv[2]).read(), sys.argv[3], float(sys.argv[4])
failed = False
sent = re.search(r"samples ([0-9]+)", log)
received = sum(l["stages"][0]["out"]["samples"] + l["stages"][0]["counters"].get("lost_samples", 0) for l in report["lanes"])
print(f"emulator samples {sent.group(1) if sent else '?'}, sources' samples + lost {received}")
failed |= not sent or int(sent.group(1)) != received
# Datagrams the kernel dropped after a lane's last received one: a stream end that no count can
# place; each lane's note gives the samples they held, at least and (GRO) at most.
ends = {l["name"]: l["stages"][0]["counters"].get("dropped_after_last_packet", 0) for l in report["lanes"]}
if any(ends.values()):
    print("lost stream ends (datagrams the kernel dropped after the last received): " +
          ", ".join(f"{name} {count}" for name, count in ends.items() if count))
    least = most = 0
    for lane in report["lanes"]:
        for note in lane["stages"][0].get("notes", []):
            held = re.search(r"the stream's end is lost, at least ([0-9]+) samples(?: \(up to ([0-9]+) with GRO\))?", note)
            if held:
                least += int(held.group(1))
                most += int(held.group(2) or held.group(1))
    if sent:
        short = int(sent.group(1)) - received
        within = least <= short <= most
        print(f"the sources fell {short} samples short of the emulator; the lost ends held {least} to {most}: "
              + ("the lost ends account for it" if within else "NOT accounted for by the lost ends"))
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

lanes_dry_pipeline() {  # lanes_dry_pipeline CONFIG GPUS LABEL RATE: what a run would be, validated; its row
  local config=$1 gpus=$2 here checked=$1 lane senders=() valid=0
  here=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU')
  if [ "$gpus" -gt "$here" ]; then
    # gpu: N is checked against the GPUs present: where they are not, validate the rest.
    checked="${config%.yaml}-nogpu.yaml"
    grep -v '^    gpu: ' "$config" > "$checked"
  fi
  for ((lane = 0; lane < lanes_count * lanes_senders; lane++)); do senders+=("$(lanes_sender_cpu "$lane")"); done
  "$pack/bin/sluice" validate "$checked" > "$out/validate.txt" 2>&1 || valid=1
  {
    echo "# would run: sluice run $config ($(grep -c '^    gpu: ' "$config") lanes with gpu: over $gpus GPUs;" \
      "light cores: $(lanes_light_list | tr '\n' ' ')); emulator senders on cores ${senders[*]}"
    [ "$lanes_split" != 0 ] && echo "# receive threads (receive_cpu) on cores" \
      "$(grep -o 'receive_cpu: [0-9]*' "$config" | cut -d' ' -f2 | tr '\n' ' ')and each udp stage's own thread on $([ "$lanes_split" = 2 ] && echo 'a core of its own' || echo 'its light cores')"
    if [ "$valid" = 0 ]; then
      head -1 "$out/validate.txt"
      grep -A6 '^  lane0:' "$out/validate.txt"
    else
      echo "VALIDATION FAILED ($checked):"
      cat "$out/validate.txt"
    fi
  } >&2
  printf '%-12s %5s x %4s %s\n' "$3" "$lanes_count" "$4" "(dry run: $([ "$valid" = 0 ] && echo valid || echo INVALID))"
  return $valid
}

lanes_peak_copies() {  # per GPU (GPUS of them) its copy rates alone, from gpu_stream_test: lanes-peak.txt
  local gpu
  : > "$out/lanes-peak.txt"
  for ((gpu = 0; gpu < lanes_gpus; gpu++)); do
    if [ "$lanes_dry" = 1 ]; then
      echo "# would run: CUDA_VISIBLE_DEVICES=$gpu gpu_stream_test --gtest_filter=StagesOnTwoStreams.*Overlap" >&2
      continue
    fi
    CUDA_VISIBLE_DEVICES=$gpu timeout 120 "$pack/bin/gpu_stream_test" \
      --gtest_filter='StagesOnTwoStreams.HostToDeviceAndDeviceToHostCopiesOverlap' > "$out/lanes-peak-$gpu.log" 2>&1 || status=1
    # "host → device alone X ms (Y GB/s), device → host alone X ms (Z GB/s)"
    sed -nE "s/.*host → device alone [0-9.]+ ms \(([0-9.]+) GB\/s\), device → host alone [0-9.]+ ms \(([0-9.]+) GB\/s\).*/$gpu \1 \2/p" \
      "$out/lanes-peak-$gpu.log" >> "$out/lanes-peak.txt"
  done
}

lanes_gpu_shares() {  # lanes_gpu_shares NAME LANES_PER_GPU...: per GPU its H2D bytes, rate and busy shares
  [ "$lanes_dry" = 1 ] && return
  [ -s "$out/$1-dmon.txt" ] || { lanes_gpu_rows+=("$1: no nvidia-smi dmon samples"); return; }
  local rows
  rows=$(python3 - "$out/$1-dmon.txt" "$out/$1-gpm.txt" "$out/lanes-peak.txt" "$1" "${GOAL_RATE:-5}" "${@:2}" <<'PY'
import sys
def samples(path):
    columns, rows = [], {}
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return rows
    for line in lines:
        if line.startswith("# gpu"):
            columns = line[1:].split()
        elif columns and not line.startswith("#") and len(line.split()) == len(columns):
            values = dict(zip(columns, line.split()))
            rows.setdefault(values["gpu"], []).append(values)
    return rows
def number(text):
    try:
        return float(text)
    except ValueError:
        return None
def mean(rows, key):
    numbers = [n for n in (number(r.get(key, "-")) for r in rows) if n is not None]
    return sum(numbers) / len(numbers) if numbers else None
dmon, gpm = samples(sys.argv[1]), samples(sys.argv[2])
peak = {line.split()[0]: float(line.split()[1]) for line in open(sys.argv[3]) if len(line.split()) == 3}
name, rate, per_gpu = sys.argv[4], float(sys.argv[5]), sys.argv[6:]
show = lambda value, form: "-" if value is None else form.format(value)
for gpu, rows in sorted(dmon.items(), key=lambda item: int(item[0])):
    # dmon's PCIe counters are MB/s sampled each second: their sum is the MB moved.
    h2d_gb = sum(number(r.get("rxpci", "-")) or 0 for r in rows) / 1000
    flowing = [r for r in rows if (number(r.get("rxpci", "-")) or 0) > 0]
    h2d = mean(flowing, "rxpci")
    h2d = None if h2d is None else h2d / 1000
    engine = None if h2d is None or gpu not in peak else h2d / peak[gpu]
    sm_gpm = None
    for key in next(iter(gpm.get(gpu, [])), {}):
        if key != "gpu":
            sm_gpm = mean(gpm[gpu], key)
    lanes = int(per_gpu[int(gpu)]) if int(gpu) < len(per_gpu) else 0
    print(f"{name:<14}{gpu:>4}{lanes:>6}{lanes * rate:>9.1f}{h2d_gb:>9.1f}{show(h2d, '{:.2f}'):>10}"
          f"{show(peak.get(gpu), '{:.1f}'):>11}{show(engine, '{:.2f}'):>8}{show(mean(flowing, 'sm'), '{:.0f}%'):>7}"
          f"{show(sm_gpm, '{:.0f}%'):>8}{show(mean(flowing, 'txpci'), '{:.0f}'):>10}")
PY
)
  mapfile -t -O "${#lanes_gpu_rows[@]}" lanes_gpu_rows <<< "$rows"
}

lanes_gpu_header() {
  printf '%-14s%4s%6s%9s%9s%10s%11s%8s%7s%8s%10s\n' run gpu lanes "GB/s in" "H2D GB" "H2D GB/s" "copy GB/s" engine SM "SMs" "D2H MB/s"
}

lanes_header() {  # GB/s: per lane; rx steal: the hypervisor's, the receive cores' mean (lanes-steal.txt)
  printf '%-12s %5s   %4s %8s %12s %12s %7s %10s %8s\n' run lanes GB/s "sent GB/s" "sent pkts" lost drops "rx busy" "rx steal"
}

lanes_ladder() {
  local rate pipeline_lost=0 loops_lost=0 row
  for rate in ${LADDER_RATES:-4 4.5 5 5.5 6}; do
    if [ "$pipeline_lost" = 0 ]; then
      row=$(lanes_pipeline "$rate" 10 "$lanes_gpus" "lanes-ladder-$rate" "$([ "$lanes_split" != 0 ] && echo "split$([ "$lanes_split" = 2 ] && echo 2)$([ "$lanes_spin_us" != 0 ] && echo " spin")$([ "$lanes_standby" = 1 ] && echo " standby")" || echo pipeline)") ||
        pipeline_lost=1
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
  local rate=${GOAL_RATE:-5} seconds=${SOAK_LANES_SECONDS:-30} row gpu per_gpu=()
  row=$(lanes_pipeline "$rate" "$seconds" "$1" "lanes-$2" "$2") || status=1
  lanes_rows+=("$row")
  lanes_check "lanes-$2" "$rate" || status=1
  [ "$1" -gt 0 ] || return 0
  # Lanes per GPU: lane K runs on GPU K % GPUS.
  for ((gpu = 0; gpu < (lanes_gpus > 1 ? lanes_gpus : 1); gpu++)); do
    per_gpu+=($(($1 > gpu ? (lanes_count - gpu + $1 - 1) / $1 : 0)))
  done
  lanes_gpu_shares "lanes-$2" "${per_gpu[@]}"
}

lanes_soaks() {  # LANES_SOAKS soaks in a row on GPUS GPUs
  local count=${LANES_SOAKS:-1} k
  if [ "$count" = 1 ]; then lanes_soak "$lanes_gpus" soak; return; fi
  for ((k = 1; k <= count; k++)); do lanes_soak "$lanes_gpus" "soak-$k"; done
}

lanes_beside_pids=()
lanes_beside_start() {  # lanes_beside_start COMMAND CORE...: COMMAND over and over on each CORE (not in a dry run)
  local command=$1 core
  shift
  lanes_beside_pids=()
  [ "$lanes_dry" = 1 ] && return
  for core in "$@"; do
    taskset -c "$core" bash -c "while :; do $command; done" &
    lanes_beside_pids+=($!)
  done
}
lanes_beside_stop() {  # ends what lanes_beside_start started
  [ "${#lanes_beside_pids[@]}" -gt 0 ] || return 0
  { pkill -P "$(IFS=,; echo "${lanes_beside_pids[*]}")"; kill "${lanes_beside_pids[@]}"; } 2> /dev/null
  wait "${lanes_beside_pids[@]}" 2> /dev/null
  lanes_beside_pids=()
}
lanes_memory_hog="dd if=/dev/zero of=/dev/null bs=256M count=4 2> /dev/null"  # the kernel clearing 256 MiB, 4 times

lanes_loops_beside() {  # lanes_loops_beside ALONE BESIDE ROUNDS RATE COMMAND CORE...: ROUNDS rounds of the
  # bare loops at RATE, alone (ALONE-R) and then beside COMMAND run over and over on each CORE (BESIDE-R)
  local alone=$1 beside=$2 rounds=$3 rate=$4 command=$5 round
  shift 5
  for ((round = 1; round <= rounds; round++)); do
    lanes_rows+=("$(lanes_loops "$rate" 10 "$alone-$round")")
    lanes_beside_start "$command" "$@"
    lanes_rows+=("$(lanes_loops "$rate" 10 "$beside-$round")")
    lanes_beside_stop
  done
}

lanes_standby_ab() {  # soaks taking turns without and with a standby receive thread a lane
  local rounds=${LANES_STANDBY_ROUNDS:-2} round order way hog=()
  if [ "$lanes_split" != 2 ] || [ "$lanes_rx_threads" != 1 ]; then
    echo "lanes-standby needs LANES_SPLIT=2 and LANES_RX_THREADS=1" >&2
    status=1
    return
  fi
  read -r -a hog <<< "${LANES_STANDBY_HOG_CPUS:-}"
  for ((round = 1; round <= rounds; round++)); do
    order="off on"
    [ $((round % 2)) = 0 ] && order="on off"  # each way goes first in every other round
    for way in $order; do
      lanes_standby=$([ "$way" = on ] && echo 1 || echo 0)
      [ "${#hog[@]}" -gt 0 ] && lanes_beside_start "$lanes_memory_hog" "${hog[@]}"
      lanes_soak "$lanes_gpus" "standby-$way-$round"
      lanes_beside_stop
    done
  done
}

lanes_loops_hog() {  # bare loops taking turns with and without memory traffic on the placing cores
  local rounds=${LANES_HOG_ROUNDS:-2} lane cores=()
  for ((lane = 0; lane < lanes_count; lane++)); do cores+=("$(lanes_placer_cpu "$lane")"); done
  lanes_loops_beside lanes-loops-plain lanes-loops-hog "$rounds" "${GOAL_RATE:-5}" "$lanes_memory_hog" "${cores[@]}"
  lanes_work_ratio lanes-loops-hog lanes-loops-plain "$rounds" "loops beside memory traffic against alone"
}

lanes_loops_busy() {  # bare loops taking turns alone and beside busy cores: does the hypervisor steal more
  # from the receive cores when the VM keeps more of its vCPUs busy?
  local rounds=${LANES_BUSY_ROUNDS:-2} core cores=() senders=() lane
  for ((lane = 0; lane < lanes_count * lanes_senders; lane++)); do senders+=("$(lanes_sender_cpu "$lane")"); done
  # A plain CPU loop (no memory traffic) on every core past the receive cores that no sender and
  # not the probe takes: the placing and light cores the pipeline would keep busy, and more.
  for ((core = 2 + lanes_count; core < lanes_host_cores; core++)); do
    [ "$core" = "$lanes_probe_cpu" ] && continue
    [[ " ${senders[*]} " == *" $core "* ]] && continue
    cores+=("$core")
  done
  lanes_loops_beside lanes-busy-alone lanes-busy-spin "$rounds" "${GOAL_RATE:-4}" ":" "${cores[@]}"
  lanes_work_ratio lanes-busy-spin lanes-busy-alone "$rounds" "loops beside busy cores against alone"
}

lanes_rc() {  # LANES_RC_ROUNDS rounds of the pipeline and the bare loops at GOAL_RATE: work a packet
  local rate=${GOAL_RATE:-4} round rounds=${LANES_RC_ROUNDS:-3}
  for ((round = 1; round <= rounds; round++)); do
    lanes_rows+=("$(lanes_pipeline "$rate" 10 "$lanes_gpus" "lanes-rc-pipeline-$round" "rc pipeline")")
    lanes_rows+=("$(lanes_loops "$rate" 10 "lanes-rc-loops-$round")")
  done
  lanes_work_ratio lanes-rc-pipeline lanes-rc-loops "$rounds" "pipeline against loops"
}

lanes_handoff() {  # LANES_HANDOFF_ROUNDS rounds of the bare loops, the handoff steps and the pipeline at GOAL_RATE
  local rate=${GOAL_RATE:-4} round rounds=${LANES_HANDOFF_ROUNDS:-2} step
  if [ "$lanes_split" != 2 ]; then
    echo "lanes: lanes-handoff takes its placing cores from LANES_SPLIT=2's layout: set LANES_SPLIT=2" >&2
    status=1
    return
  fi
  for ((round = 1; round <= rounds; round++)); do
    for step in none pass read copy; do
      lanes_rows+=("$(lanes_loops "$rate" 10 "lanes-handoff-$step-$round" "$step")")
    done
    lanes_rows+=("$(lanes_pipeline "$rate" 10 "$lanes_gpus" "lanes-handoff-pipeline-$round" "hf pipeline")")
  done
  for step in pass read copy pipeline; do
    lanes_work_ratio "lanes-handoff-$step" lanes-handoff-none "$rounds" "$step against the bare loops"
  done
}

lanes_ab() {  # LANES_AB_ROUNDS rounds of the pipeline built from LANES_AB_BIN and from this pack, and the
  # bare loops, at GOAL_RATE; with LANES_AB_STEP a handoff step of each build's udp_receive_loops too
  local rate=${GOAL_RATE:-4} round rounds=${LANES_AB_ROUNDS:-2} step=${LANES_AB_STEP:-} base=${LANES_AB_BIN:-}
  if [ -z "$base" ] || { [ "$lanes_dry" != 1 ] && [ ! -x "$base/sluice" ]; }; then
    echo "lanes: lanes-ab needs LANES_AB_BIN, a directory with the other build's sluice and udp_receive_loops" >&2
    status=1
    return
  fi
  if [ -n "$step" ] && [ "$lanes_split" != 2 ]; then
    echo "lanes: LANES_AB_STEP takes its placing cores from LANES_SPLIT=2's layout: set LANES_SPLIT=2" >&2
    status=1
    return
  fi
  for ((round = 1; round <= rounds; round++)); do
    lanes_rows+=("$(lanes_loops "$rate" 10 "lanes-ab-loops-$round")")
    lanes_bin=$base
    lanes_rows+=("$(lanes_pipeline "$rate" 10 "$lanes_gpus" "lanes-ab-base-$round" "ab base")")
    [ -n "$step" ] && lanes_rows+=("$(lanes_loops "$rate" 10 "lanes-ab-base-$step-$round" "$step")")
    lanes_bin=$pack/bin
    lanes_rows+=("$(lanes_pipeline "$rate" 10 "$lanes_gpus" "lanes-ab-this-$round" "ab this")")
    [ -n "$step" ] && lanes_rows+=("$(lanes_loops "$rate" 10 "lanes-ab-this-$step-$round" "$step")")
  done
  lanes_work_ratio lanes-ab-this lanes-ab-base "$rounds" "this build's pipeline against the base build's"
  lanes_work_ratio lanes-ab-base lanes-ab-loops "$rounds" "base build's pipeline against the bare loops"
  lanes_work_ratio lanes-ab-this lanes-ab-loops "$rounds" "this build's pipeline against the bare loops"
  if [ -n "$step" ]; then
    lanes_work_ratio "lanes-ab-this-$step" "lanes-ab-base-$step" "$rounds" "this build's $step against the base build's"
  fi
}

lanes_membw() {  # the kernel clearing 256 MiB buffers (dd from /dev/zero) on 1, 2, 4 … cores at once: the
  # host's memory write rate, against which the probes' slowdowns read as a share of what is left
  local k core pids=() max=$((lanes_host_cores - 2))
  [ "$lanes_dry" = 1 ] && { echo "# would run: dd on 1, 2, 4 … $max cores at once" >&2; return; }
  for ((k = 1; k <= max; k *= 2)); do
    pids=()
    for ((core = 2; core < 2 + k; core++)); do
      taskset -c "$core" dd if=/dev/zero of=/dev/null bs=256M count=16 2> "$out/membw-$k-$core.txt" &
      pids+=($!)
    done
    wait "${pids[@]}"
    python3 - "$k" "$out"/membw-"$k"-*.txt <<'PY' > "$out/membw-$k.txt" || status=1
import re, sys
rates, failed = [], []
for path in sys.argv[2:]:
    text = open(path).read()
    m = re.search(r"copied, [0-9.e-]+ s, ([0-9.]+) ([GM])B/s", text)
    if m:
        rates.append(float(m.group(1)) / (1 if m.group(2) == "G" else 1000))
    else:
        failed.append(f"{path.rsplit('-', 1)[1][:-4]}: {text.strip() or 'no output'}")
if failed:
    print(f"memory write on {sys.argv[1]} cores at once: dd failed on core " + "; ".join(failed))
    sys.exit(1)
print(f"memory write (dd /dev/zero, 256 MiB blocks) on {sys.argv[1]} cores at once: {sum(rates):.1f} GB/s in all, "
      f"{min(rates):.2f}-{max(rates):.2f} each")
PY
    tee -a "$out/lanes-membw.txt" < "$out/membw-$k.txt"
    rm -f "$out"/membw-"$k"-*.txt "$out/membw-$k.txt"
  done
}

lanes_work_ratio() {  # lanes_work_ratio A B ROUNDS LABEL: runs A-1.. against B-1..: their work a packet
  [ "$lanes_dry" = 1 ] && return
  lanes_work_rows+=("$(python3 - "$out/lanes-work.txt" "$@" <<'PY'
import os, statistics, sys
work = dict(line.split() for line in open(sys.argv[1]))
steal_path = sys.argv[1].rsplit("/", 1)[0] + "/lanes-steal.txt"
steal = {line.split()[0]: float(line.split()[1]) for line in open(steal_path)} if os.path.exists(steal_path) else {}
rounds = range(1, int(sys.argv[4]) + 1)
first = [float(work.get(f"{sys.argv[2]}-{r}", 0)) for r in rounds]
second = [float(work.get(f"{sys.argv[3]}-{r}", 0)) for r in rounds]
ratio = statistics.median(first) / statistics.median(second) if min(second) > 0 else 0
stolen = lambda name: ", ".join(f"{steal[f'{name}-{r}']:.3f}" if f"{name}-{r}" in steal else "-" for r in rounds)
print(f"{sys.argv[5]}: receive cores' work a packet (busy less spin, us) {', '.join(f'{w:.2f}' for w in first)} "
      f"against {', '.join(f'{w:.2f}' for w in second)}; ratio of medians {ratio:.2f}; per round "
      + ", ".join(f"{a / b:.2f}" if b else "-" for a, b in zip(first, second))
      + f"; the hypervisor's steal on the receive cores {stolen(sys.argv[2])} against {stolen(sys.argv[3])}")
PY
)")
}

lanes_pcp() {  # soaks taking turns: the kernel's per-core page lists, then larger ones
  local fraction=${LANES_PCP_FRACTION:-8} round saved=0
  [ "$lanes_dry" = 1 ] || saved=$(cat /proc/sys/vm/percpu_pagelist_high_fraction)
  for ((round = 1; round <= ${LANES_PCP_ROUNDS:-2}; round++)); do
    lanes_pcp_set 0
    lanes_soak "$lanes_gpus" "pcp0-$round"
    lanes_pcp_set "$fraction"
    lanes_soak "$lanes_gpus" "pcp$fraction-$round"
  done
  lanes_pcp_set "$saved"
}

lanes_cores_lanes() {  # lanes that fit a core per stage (6 a lane past the system's two), a multiple of GPUS
  local step=$((lanes_gpus > 0 ? lanes_gpus : 1)) fit
  fit=$(((lanes_host_cores - 2) / 6 / step * step))
  [ "$fit" -lt "$step" ] && fit=$step
  [ "$fit" -gt "$lanes_count" ] && fit=$lanes_count
  echo "$fit"
}

lanes_cores_row() {  # lanes_cores_row NAME LAYOUT: the light cores' busy shares and each stage's busy fraction
  # shellcheck disable=SC2046 # one argument per light core
  python3 - "$out/$1-stat-before.txt" "$out/$1-stat-after.txt" "$out/$1.json" "$2" "$lanes_count" \
    $(lanes_light_list) <<'PY'
import json, sys
def load(path):
    return {l.split()[0]: list(map(int, l.split()[1:9])) for l in open(path) if l.startswith("cpu") and l[3].isdigit()}
before, after = load(sys.argv[1]), load(sys.argv[2])
shares = []
for core in sys.argv[6:]:
    d = [a - b for a, b in zip(after[f"cpu{core}"], before[f"cpu{core}"])]
    shares.append(1 - (d[3] + d[4]) / (sum(d) or 1))
report = json.load(open(sys.argv[3]))
stages = {}
for lane in report["lanes"]:
    for s in lane["stages"][1:]:
        stages[s["name"]] = max(stages.get(s["name"], 0), s.get("busy_fraction_flowing", 0))
lost = sum(lane["stages"][0]["counters"].get("lost_samples", 0) for lane in report["lanes"])
drops = sum(s.get("drops_total", 0) for lane in report["lanes"] for s in lane["stages"])
layout = {"stage": "core per stage", "1": "core per lane", "2": "2-core set, 2 lanes"}.get(sys.argv[4], sys.argv[4])
print(f"{layout:<20}{sys.argv[5]:>6}{len(shares):>7}{sum(shares) / len(shares):>7.2f}{max(shares):>7.2f}" +
      "".join(f"{stages.get(name, 0):>8.2f}" for name in ("link", "fft", "record", "sink")) + f"{lost:>12}{drops:>7}")
PY
}

lanes_cores() {  # the same lanes at one rate in each light-core layout of CORES_LAYOUTS
  local saved_count=$lanes_count saved_light=$lanes_light layout row rate=${CORES_RATE:-${GOAL_RATE:-5}}
  lanes_count=${CORES_LANES:-$(lanes_cores_lanes)}
  for layout in ${CORES_LAYOUTS:-stage 1 2}; do
    lanes_light=$layout
    # A loss here is a finding of the comparison, not a failed check.
    row=$(lanes_pipeline "$rate" "${CORES_SECONDS:-10}" "$lanes_gpus" "lanes-cores-$layout" "cores-$layout")
    lanes_rows+=("$row")
    [ "$lanes_dry" = 1 ] || lanes_cores_rows+=("$(lanes_cores_row "lanes-cores-$layout" "$layout")")
  done
  lanes_count=$saved_count
  lanes_light=$saved_light
}

lanes_summary() {
  echo "lanes: $lanes_count lanes, GPUS=$lanes_gpus, fft $lanes_fft$([ "$lanes_split" != 0 ] && echo ", receive threads split off (LANES_SPLIT=$lanes_split)"); checks in lanes-checks.txt"
  [ -f "$out/lanes-checks.txt" ] && grep -E "WRONG|!=|drops|samples" "$out/lanes-checks.txt" | tail -$((2 * lanes_count + 6))
  [ -f "$out/lanes-queues.txt" ] && cat "$out/lanes-queues.txt"
  [ -f "$out/lanes-core-waits.txt" ] && cat "$out/lanes-core-waits.txt"
  [ -f "$out/lanes-receive.txt" ] && cat "$out/lanes-receive.txt"
  [ -f "$out/lanes-vmstat.txt" ] && cat "$out/lanes-vmstat.txt"
  [ -f "$out/lanes-probe.txt" ] && cat "$out/lanes-probe.txt"
  if [ -f "$out/lanes-steal.txt" ]; then
    echo "the hypervisor's steal (/proc/stat: a vCPU ready to run while the host ran other work), a share of each"
    echo "core's time over the send: run, receive cores' mean, their most, every core's mean"
    cat "$out/lanes-steal.txt"
  fi
  [ -f "$out/lanes-warm.txt" ] && cat "$out/lanes-warm.txt"
  [ "${#lanes_work_rows[@]}" -gt 0 ] && printf '%s\n' "${lanes_work_rows[@]}"
  lanes_header
  printf '%s\n' "${lanes_rows[@]}"
  if [ "${#lanes_gpu_rows[@]}" -gt 0 ]; then
    echo
    echo "per GPU: GB/s in = its lanes x rate; H2D = dmon rxpci (sum, mean while flowing); copy GB/s = the GPU's"
    echo "host-to-device copy alone (gpu_stream_test); engine = H2D / copy; SM = dmon sm; SMs = GPM SM share"
    lanes_gpu_header
    printf '%s\n' "${lanes_gpu_rows[@]}"
  fi
  if [ "${#lanes_cores_rows[@]}" -gt 0 ]; then
    echo
    echo "light cores, ${CORES_RATE:-${GOAL_RATE:-5}} GB/s per lane, ${CORES_SECONDS:-10} s: busy share of the light cores (mean, max);"
    echo "each light stage's busy fraction while data flowed (the most of any lane)"
    printf '%-20s%6s%7s%7s%7s%8s%8s%8s%8s%12s%7s\n' layout lanes cores mean max link fft record sink lost drops
    printf '%s\n' "${lanes_cores_rows[@]}"
  fi
}

lanes_caches() {  # the CPU's model and caches (lscpu, sysfs), and a cache line's round trip between every
  # pair of cores past the system's two with the groups of cores that share a cache (core_pairs)
  local index
  if [ "$lanes_dry" = 1 ]; then
    echo "# would run: lscpu; core_pairs --cores 2-$((lanes_host_cores - 1)) --json $out/lanes-core-pairs.json" >&2
    return
  fi
  {
    lscpu | grep -E '^(Model name|Vendor ID|Socket|Core|Thread|NUMA node|L1d|L2|L3)'
    for index in /sys/devices/system/cpu/cpu2/cache/index*; do
      echo "cpu 2 cache: L$(cat "$index/level") $(cat "$index/type") $(cat "$index/size"), shared with cpus $(cat "$index/shared_cpu_list")"
    done
  } | tee "$out/lanes-caches.txt"
  "$pack/bin/core_pairs" --cores "2-$((lanes_host_cores - 1))" --json "$out/lanes-core-pairs.json" \
    | tee "$out/lanes-core-pairs.txt" || status=1
}

lanes_topology() {  # each core's hyperthread siblings and NUMA node, and a LANES_SENDER_CPUS for this layout
  local busy=() lane core
  for ((lane = 0; lane < lanes_count; lane++)); do busy+=("r$(lanes_rx_cpu "$lane")"); done
  if [ "$(lanes_placers)" != 0 ]; then
    for ((lane = 0; lane < lanes_count; lane++)); do busy+=("p$(lanes_placer_cpu "$lane")"); done
  fi
  for core in $(lanes_light_list); do busy+=("l$core"); done
  python3 - "$((lanes_count * lanes_senders))" "${busy[@]}" <<'PY'
import glob, re, sys
def cpus(text):  # "0-3,8" -> [0, 1, 2, 3, 8]
    out = []
    for part in text.strip().split(","):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out
siblings, nodes = {}, {}
for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list"):
    cpu = int(re.search(r"cpu([0-9]+)/", path).group(1))
    siblings[cpu] = [c for c in cpus(open(path).read()) if c != cpu]
for path in glob.glob("/sys/devices/system/node/node[0-9]*/cpulist"):
    for cpu in cpus(open(path).read()):
        nodes[cpu] = int(re.search(r"node([0-9]+)/", path).group(1))
roles = {"r": ("receive", 1.0), "p": ("placing", 0.8), "l": ("light", 0.4)}  # each role's name and load
busy = {int(b[1:]): roles[b[0]] for b in sys.argv[2:]}
for cpu in sorted(siblings):
    role = busy[cpu][0] if cpu in busy else "-"
    print(f"cpu {cpu:>3}  node {nodes.get(cpu, '?')}  siblings {','.join(map(str, siblings[cpu])) or '-':<8} {role}")
free = [c for c in sorted(siblings) if c not in busy and c > 1]
free.sort(key=lambda c: (sum(busy[s][1] for s in siblings[c] if s in busy), c))
print("LANES_SENDER_CPUS=\"" + " ".join(map(str, free[: int(sys.argv[1])])) + "\"")
PY
}

case $mode in
  # over 600 s at full size
  lanes) lanes_warm; lanes_probe_idle; lanes_ladder; lanes_peak_copies; lanes_soak "$lanes_gpus" soak; lanes_soak 1 onegpu; lanes_summary ;;
  lanes-ladder) lanes_warm; lanes_probe_idle; lanes_ladder; lanes_summary ;;
  lanes-soak) lanes_warm; lanes_probe_idle; lanes_peak_copies; lanes_soaks; lanes_summary ;;
  lanes-onegpu) lanes_warm; lanes_probe_idle; lanes_peak_copies; lanes_soak 1 onegpu; lanes_soak "$lanes_gpus" soak; lanes_summary ;;
  lanes-cores) lanes_warm; lanes_probe_idle; lanes_cores; lanes_summary ;;
  lanes-pcp) lanes_warm; lanes_probe_idle; lanes_peak_copies; lanes_pcp; lanes_summary ;;
  lanes-rc) lanes_warm; lanes_probe_idle; lanes_rc; lanes_summary ;;
  lanes-standby) lanes_warm; lanes_probe_idle; lanes_standby_ab; lanes_summary ;;
  lanes-hog) lanes_warm; lanes_probe_idle; lanes_loops_hog; lanes_summary ;;
  lanes-busy) lanes_warm; lanes_probe_idle; lanes_loops_busy; lanes_summary ;;
  lanes-handoff) lanes_warm; lanes_probe_idle; lanes_handoff; lanes_summary ;;
  lanes-ab) lanes_warm; lanes_probe_idle; lanes_ab; lanes_summary ;;
  lanes-membw) lanes_warm; lanes_membw ;;
  lanes-topology) lanes_topology | tee "$out/lanes-topology.txt"; lanes_caches ;;
esac
