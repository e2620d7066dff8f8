#!/usr/bin/env bash
# The roce link (one lane, and two lanes on two QPs) against perftest's ib_write_bw at 1 and 4 MiB
# messages, RUNS interleaved rounds in one Soft-RoCE VM boot; prints the medians and ratios.
#   bench/stages/rdma_vm_bench.sh BUILD_DIR [RUNS]      (RUNS defaults to 5; needs qemu and perftest)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: rdma_vm_bench.sh BUILD_DIR [RUNS]}
runs=${2:-5}
bench=$(cd "$build" && pwd)/bench/stages/rdma_link_bench
[ -x "$bench" ] || { echo "rdma_vm_bench: $bench not built" >&2; exit 2; }
perftest=$(command -v ib_write_bw) || { echo "rdma_vm_bench: ib_write_bw not found (apt-get install perftest)" >&2; exit 2; }

# Not under /tmp: the guest mounts a fresh tmpfs there.
inner=$(cd "$build" && pwd)/rdma-vm-bench-inner.sh
trap 'rm -f "$inner"' EXIT
cat >"$inner" <<INNER
#!/bin/sh
# Runs inside the VM. About 128 MB per run: long enough against the emulation's jitter.
set -e
address=\${SLUICE_VM_ADDRESS}
for size in 1048576 4194304; do
  count=\$((134217728 / size))
  for run in \$(seq 1 $runs); do
    $perftest -d rxe0 -F -s \$size -n \$count -p 18515 >/dev/null 2>&1 &
    server=\$!
    sleep 1
    bw=\$($perftest -d rxe0 -F -s \$size -n \$count -p 18515 \$address 2>/dev/null | awk -v s=\$size '\$1 == s { print \$4 }')
    wait \$server || true
    echo "ib_write_bw size=\$size MB/s=\$bw"
    $bench \$address 7600 \$size \$count 1
    $bench \$address 7610 \$size \$((count / 2)) 2
  done
done
INNER
chmod +x "$inner"
"$here/../../tests/vm/run_in_vm.sh" --mem 1024 --timeout 1500 --bin "$perftest" --bin "$bench" -- "$inner" |
  tee /dev/stderr |
  awk '
    /MB\/s=/ {
      split($0, fields, " "); name = fields[1]; size = ""; lanes = "1"; rate = ""
      for (i = 2; i <= length(fields); ++i) {
        split(fields[i], kv, "=")
        if (kv[1] == "size") size = kv[2]; else if (kv[1] == "lanes") lanes = kv[2]; else if (kv[1] == "MB/s") rate = kv[2]
      }
      key = (name == "ib_write_bw") ? "ib_write_bw" : "link_" lanes "lane"
      values[size, key] = values[size, key] " " rate; sizes[size] = 1
    }
    function median(list,   n, a, i, j, t) {
      n = split(list, a, " ")
      for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END {
      printf "%-9s %12s %12s %12s %10s %10s\n", "size", "ib_write_bw", "link 1 lane", "link 2 lanes", "1 lane/ib", "2/1 lanes"
      for (size in sizes) {
        ib = median(values[size, "ib_write_bw"]); one = median(values[size, "link_1lane"]); two = median(values[size, "link_2lane"])
        printf "%-9s %12.1f %12.1f %12.1f %10.2f %10.2f\n", size / 1048576 "MiB", ib, one, two, one / ib, two / one
      }
    }'
