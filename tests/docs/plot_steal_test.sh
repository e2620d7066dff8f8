#!/usr/bin/env bash
# docs/figures/steal_16_lanes.svg is scripts/plot_steal.py's drawing of the CSV beside it: redrawn
# here, it must be the committed picture byte for byte, with a dot for every run in its group.
#   plot_steal_test.sh SOURCE_DIR
set -uo pipefail
source_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
figures="$source_dir/docs/figures"
python3 "$source_dir/scripts/plot_steal.py" "$figures/steal_16_lanes.csv" "$work/steal.svg" || exit 1
failed=0
if ! cmp -s "$work/steal.svg" "$figures/steal_16_lanes.svg"; then
  echo "FAIL: docs/figures/steal_16_lanes.svg is not the CSV's drawing: run scripts/plot_steal.py"
  failed=1
fi
runs=$(($(wc -l < "$figures/steal_16_lanes.csv") - 1))
dots=$(grep -c '<circle' "$work/steal.svg")
if [ "$dots" != "$runs" ]; then
  echo "FAIL: $dots dots for $runs runs"
  failed=1
fi
lost=$(awk -F, 'NR > 1 && $3 == "pipeline" && $6 != 0' "$figures/steal_16_lanes.csv" | wc -l)
if ! grep -q "pipeline, lost ($lost)" "$work/steal.svg"; then
  echo "FAIL: the lost group does not hold the CSV's $lost lossy pipeline runs"
  failed=1
fi
busy=$(awk -F, 'NR > 1 && $3 == "loops_busy"' "$figures/steal_16_lanes.csv" | wc -l)
if ! grep -q "loops beside busy cores ($busy)" "$work/steal.svg"; then
  echo "FAIL: the busy-cores group does not hold the CSV's $busy runs of the loops beside busy cores"
  failed=1
fi
[ "$failed" = 0 ] && echo "ok: $dots runs, $lost lossy pipeline runs"
exit $failed
