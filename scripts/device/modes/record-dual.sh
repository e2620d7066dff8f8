# The dual-port pipeline at 2 x 3 GB/s for RECORD_SECONDS (10) with raw ci16 recorded over the
# 4 volumes: port0 before the link (host memory) on volumes 0-1, port1 after the link (GPU
# memory, pinned bounce) on volumes 2-3. Lossless means 0 lost packets and 0 drops; every
# received sample must reach its raw tap, and `sluice capture info` must read both captures.
# shellcheck shell=bash disable=SC1091
source "$pack/modes/record.sh"
record_make_volumes 4
record_config
table="$out/record-dual-table.txt"
printf '%-9s%9s %9s %11s %10s %6s %12s %6s\n' run rate 'GB/s' sent_pkts lost_pkts drops tap_samples info > "$table"
row=$(record_dual_run 3GB/s "${RECORD_SECONDS:-10}" on)
echo "$row" >> "$table"
verdict=$(echo "$row" | awk '{ print ($5 == 0 && $6 == 0 && $7 == "all" && $8 == "ok") ? "lossless" : "LOST" }')
record_row dual "2 x 3 GB/s ${RECORD_SECONDS:-10} s, raw host+GPU over 4 volumes (first run)" "$verdict" "-" "-"
grep -h -i -E 'warn|allocated' "$out"/record-3GB-*-on.log | sort -u | head -4
cat "$out"/record-*-taps.txt 2> /dev/null | sort | tail -12
cat "$table"
record_table
