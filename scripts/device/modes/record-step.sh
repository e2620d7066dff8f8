# Rate by rate (RECORD_RATES, GB/s per port, 5 s each), the dual-port pipeline with the raw
# taps over the 4 volumes and without them, until each loses; the ratio of the highest
# lossless rates (goal >= 0.9).
# shellcheck shell=bash disable=SC1091
source "$pack/modes/record.sh"
record_make_volumes 4
record_config
table="$out/record-step-table.txt"
printf '%-9s%9s %9s %11s %10s %6s %12s %6s\n' run rate 'GB/s' sent_pkts lost_pkts drops tap_samples info > "$table"
best_on=none best_off=none on_done=0 off_done=0
for rate in ${RECORD_RATES:-3 3.5 4 4.5 5 5.5}; do
  for taps in on off; do
    done_var=${taps}_done
    [ "${!done_var}" = 0 ] || continue
    row=$(record_dual_run "${rate}GB/s" 5 "$taps")
    echo "$row" >> "$table"
    verdict=$(echo "$row" | awk -v want="$rate" '{ if ($5 != 0 || $6 != 0 || ($7 != "all" && $7 != "-")) print "lost";
      else if ($3 < 0.97 * 2 * want) print "sender"; else print "ok" }')
    case $verdict in
      ok) printf -v "best_$taps" '%s' "$rate" ;;
      *) printf -v "$done_var" 1 ;;
    esac
  done
  [ "$on_done$off_done" = 11 ] && break
done
ratio=-
[[ $best_on == none || $best_off == none ]] || ratio=$(awk -v a="$best_on" -v b="$best_off" 'BEGIN { printf "%.2f", a / b }')
record_row step "highest lossless GB/s a port, raw taps on vs off, 5 s runs" "$best_on" "off $best_off" "$ratio"
cat "$out"/record-*-taps.txt 2> /dev/null | sort | tail -12
cat "$table"
record_table
