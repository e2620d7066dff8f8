#!/usr/bin/env bash
# Soft-RoCE throughput in one VM boot: ib_write_bw at 1 and 4 MiB messages, interleaved, medians; the
# link's cases join the same loop in guest_loop.sh, so every ratio compares runs of one boot.
#   bench/vm/write_bw_bench.sh [ROUNDS] [MIB_PER_RUN]   (5, 128; SLUICE_VM_CACHE as run_in_vm.sh's)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=${1:-5}
mib=${2:-128}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "write_bw_bench: ROUNDS must be a positive integer" >&2; exit 2; }
[[ $mib =~ ^[1-9][0-9]*$ ]] || { echo "write_bw_bench: MIB_PER_RUN must be a positive integer" >&2; exit 2; }
exec "$here/../../tests/vm/run_in_vm.sh" --timeout 1800 \
  --bin ib_write_bw --file "$here/../../tests/vm/guest/write_bw.sh" \
  -- sh "$here/guest_loop.sh" "$here/../../tests/vm/guest/write_bw.sh" "$rounds" "$mib"
