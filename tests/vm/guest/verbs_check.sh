#!/bin/sh
# Runs inside the test VM: the verbs tools see rxe0 with an active 4096-MTU RoCE port, and
# perftest's ib_write_bw moves 1 MiB messages at a nonzero rate.
set -u
fail() { echo "verbs_check: $*" >&2; exit 1; }
ibv_devices | grep -qw rxe0 || fail "ibv_devices does not list rxe0"
info=$(ibv_devinfo -d rxe0) || fail "ibv_devinfo -d rxe0 failed"
echo "$info"
echo "$info" | grep -q 'state:.*PORT_ACTIVE' || fail "rxe0's port is not active"
echo "$info" | grep -q 'active_mtu:.*4096' || fail "rxe0 does not use a 4096-byte MTU"
echo "$info" | grep -q 'link_layer:.*Ethernet' || fail "rxe0 is not RoCE (link layer not Ethernet)"
sh "$(dirname "$0")/write_bw.sh" 1048576 32 || fail "ib_write_bw at 1 MiB failed"
