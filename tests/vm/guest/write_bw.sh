#!/bin/sh
# Inside the test VM (busybox sh): an ib_write_bw server and client on rxe0 over rdma_cm; prints
# "write_bw BYTES MB_PER_S" (the client's BW average over all QPs), non-zero when either side fails.
#   write_bw.sh MESSAGE_BYTES ITERATIONS [QUEUE_PAIRS]     (ITERATIONS per queue pair; 1 QP)
set -u
size=$1
iterations=$2
queue_pairs=${3:-1}
address=${SLUICE_VM_ADDRESS:-192.0.2.1}
# -R: connect through rdma_cm (it picks the RoCEv2 GID); -F: no CPU-frequency warning.
options="-R -F -d rxe0 -s $size -n $iterations -q $queue_pairs"
log=/tmp/write_bw.$$
timeout 120 ib_write_bw $options > $log.server 2>&1 &
server=$!
# The server needs a moment to listen; a client that came too early is refused, so retry.
attempt=0
while :; do
  sleep 1
  attempt=$((attempt + 1))
  if timeout 120 ib_write_bw $options "$address" > $log.client 2>&1; then
    break
  fi
  if [ $attempt -ge 5 ] || ! kill -0 $server 2>/dev/null; then
    echo "write_bw: client failed (attempt $attempt):" >&2
    cat $log.client >&2
    echo "write_bw: server said:" >&2
    cat $log.server >&2
    kill $server 2>/dev/null
    exit 1
  fi
done
if ! wait $server; then
  echo "write_bw: server failed:" >&2
  cat $log.server >&2
  exit 1
fi
# The result row: bytes, iterations, BW peak, BW average (MB/s), message rate.
bandwidth=$(awk -v size="$size" '$1 == size && NF >= 5 { print $4 }' $log.client)
case $bandwidth in
  ''|*[!0-9.]*|0|0.0|0.00)
    echo "write_bw: no nonzero bandwidth line for $size-byte messages in the client's output:" >&2
    cat $log.client >&2
    exit 1 ;;
esac
echo "write_bw $size $bandwidth"
