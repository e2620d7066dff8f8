#!/bin/sh
# Runs inside the test VM (busybox sh): every case at every size, ROUNDS times, the order of
# sizes flipped each round so neither always runs first; then one median line per case and size.
#   guest_loop.sh WRITE_BW_SCRIPT ROUNDS MIB_PER_RUN
set -u
write_bw=$1
rounds=$2
mib=$3
results=/tmp/bench_results
: > $results

# Each case prints "NAME BYTES MB_PER_S" for one run of MIB_PER_RUN MiB at BYTES per message.
case_ib_write_bw() {
  bytes=$1
  iterations=$((mib * 1048576 / bytes))
  [ $iterations -ge 5 ] || iterations=5  # perftest's minimum
  sh "$write_bw" "$bytes" $iterations | awk '$1 == "write_bw" { print "ib_write_bw", $2, $3 }'
}
cases="ib_write_bw"

round=1
while [ $round -le "$rounds" ]; do
  if [ $((round % 2)) -eq 1 ]; then sizes="1048576 4194304"; else sizes="4194304 1048576"; fi
  for bytes in $sizes; do
    for name in $cases; do
      line=$(case_$name "$bytes") || { echo "guest_loop: $name at $bytes bytes failed" >&2; exit 1; }
      [ -n "$line" ] || { echo "guest_loop: $name at $bytes bytes printed no result" >&2; exit 1; }
      echo "round $round: $line MB/s"
      echo "$line" >> $results
    done
  done
  round=$((round + 1))
done

echo "medians over $rounds interleaved runs of $mib MiB each (MB/s = 10^6 bytes/s):"
for name in $cases; do
  for bytes in 1048576 4194304; do
    awk -v n="$name" -v b="$bytes" '$1 == n && $2 == b { print $3 }' $results | sort -n |
      awk -v n="$name" -v b="$bytes" '{ v[NR] = $1; all = all " " $1 }
        END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
              printf "%-14s %4d KiB  median %8.2f MB/s  runs:%s\n", n, b / 1024, m, all }'
  done
done
