#!/usr/bin/env bash
# The storage-node playback over roce against ib_write_bw (a QP per lane, 4 MiB messages), ROUNDS (5)
# interleaved rounds in one Soft-RoCE VM boot; fails below 0.9x the ratio of medians.
#   bench/vm/storage_node_bench.sh BUILD_DIR [ROUNDS]   (SLUICE_VM_CACHE and exit status as run_in_vm.sh's)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root="$here/../.."
build=$(cd "${1:?usage: storage_node_bench.sh BUILD_DIR [ROUNDS]}" && pwd)
rounds=${2:-5}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "storage_node_bench: ROUNDS must be a positive integer" >&2; exit 2; }
exec "$root/tests/vm/run_in_vm.sh" --timeout 1800 --mem 2048 \
  --bin "$build/cli/sluice" --bin "$build/emulator/sluice-emulator" \
  --bin ib_write_bw --file "$root/tests/vm/guest/write_bw.sh" --file "$root/configs/storage_node.yaml" \
  --file "$root/configs/storage_node_playback.yaml" \
  -- env TMPDIR=/dev/shm SLUICE_RATE_ROUNDS="$rounds" "$build/tests/e2e/storage_node_roce_test" \
  --gtest_filter='*Playback*'
