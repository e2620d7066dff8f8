# Removes the record-* volumes and the summary.
# shellcheck shell=bash disable=SC1091
source "$pack/modes/record.sh"
bash "$pack/volumes.sh" remove "$record_volumes" || status=1
rm -f "$record_volumes.made" "$record_summary"
