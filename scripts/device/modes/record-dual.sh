# The dual-port pipeline at 2 x 3 GB/s for RECORD_SECONDS (10), raw ci16 over 4 volumes (port0
# before the link, port1 after it through the pinned bounce; RECORD_EXTRA adds settings), checked
# bit-exact; then the recorder against fio on the same volumes (record_vs_fio).
# shellcheck shell=bash disable=SC1091
source "$pack/modes/record.sh"
record_make_volumes 4
record_config
table="$out/record-dual-table.txt"
printf '%-9s%9s %9s %11s %10s %6s %12s %6s\n' run rate 'GB/s' sent_pkts lost_pkts drops tap_samples info > "$table"
row=$(record_dual_run 3GB/s "${RECORD_SECONDS:-10}" on)
echo "$row" >> "$table"
verdict=$(echo "$row" | awk '{ print ($5 == 0 && $6 == 0 && $7 == "all" && $8 == "bit-exact") ? "lossless" : "LOST" }')
record_row dual "2 x 3 GB/s ${RECORD_SECONDS:-10} s, raw host+GPU over 4 volumes (first run)" "$verdict" "-" "-"
# One row per tap of this run: "port0.raw: writes 3.00 GB/s, longest submit 1.2 ms, ..."
taps="$out/record-3GB-${RECORD_SECONDS:-10}s-on-taps.txt"
while IFS= read -r line; do
  tap=${line%%:*}
  rate=$(echo "$line" | sed -n 's/.*writes \([0-9.]*\) GB\/s.*/\1/p')
  submit=$(echo "$line" | sed -n 's/.*longest submit \([0-9.]*\) ms.*/\1/p')
  record_row tap "$tap: write GB/s, longest submit" "${rate:-?}" "${submit:-?} ms" "-"
done < <(sort "$taps" 2> /dev/null)
# Data files each capture left (more than one a volume where RECORD_EXTRA sets rotate:).
for capture in raw:0 gpu-raw:2; do
  files=$(find "${record_mounts[${capture#*:}]}/cap" "${record_mounts[$((${capture#*:} + 1))]}/cap" \
    -name "dual_port-${capture%%:*}-*.sigmf-data" 2> /dev/null | wc -l)
  record_row files "dual_port-${capture%%:*}: data files over its 2 volumes" "$files" "-" "-"
done
for mount in "${record_mounts[@]}"; do rm -rf "$mount/cap"; done  # room for the bench's files
[ "${RECORD_FIO_REPETITIONS:-1}" -gt 0 ] && record_vs_fio dual-fio "${RECORD_FIO_REPETITIONS:-1}"
grep -h -i -E 'warn|allocated' "$out"/record-3GB-*-on.log | sort -u | head -4
cat "$table"
record_table
