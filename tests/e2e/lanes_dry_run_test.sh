#!/usr/bin/env bash
# run.sh's lanes modes (scripts/device/modes/lanes.sh) in a dry run: LANES_DRY_RUN=1 writes every
# config a mode would run, has the real sluice validate each and prints the commands, and sends
# nothing. The device is lent for minutes at a time; a mode that no longer builds its configs, or a
# config that no longer validates, must fail here first. Two layouts: 8 lanes on a 32-core two-GPU
# host and 16 lanes on a 64-core four-GPU host.
#   lanes_dry_run_test.sh SLUICE SOURCE_DIR
set -uo pipefail
sluice=$(realpath "$1")  # linked into the pack from elsewhere: a relative path would point nowhere
source_dir=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/pack/bin" "$work/pack/modes"
cp "$source_dir/scripts/device/run.sh" "$work/pack/"
cp "$source_dir"/scripts/device/modes/*.sh "$work/pack/modes/"
ln -s "$sluice" "$work/pack/bin/sluice"
modes=(lanes-ladder lanes-soak lanes-onegpu lanes-rc lanes-hog lanes-busy lanes-handoff lanes-ab lanes-standby lanes-membw
  lanes-topology)
# Pipeline runs the modes above make: ladder 5 (LADDER_RATES' default), soak 1, onegpu 2, rc 3,
# handoff 2, ab 4, standby 4.
expected=21
failed=0
for layout in "LANES=8 GPUS=2 LANES_HOST_CORES=32 LANES_LIGHT_SETS=2" "LANES=16 GPUS=4 LANES_HOST_CORES=64 LANES_LIGHT_SETS=4"; do
  log="$work/log"
  # shellcheck disable=SC2086  # the layout is a list of settings
  env $layout LANES_SPLIT=2 RECEIVE_SPIN_US=10000 LANES_DRY_RUN=1 LANES_AB_BIN="$work/base" LANES_AB_STEP=pass \
    LANES_STANDBY_HOG_CPUS="0 1" OUT="$work/out" bash "$work/pack/run.sh" "${modes[@]}" > "$log" 2>&1
  rc=$?
  # lanes-standby's soaks differ only in the standby thread: each lane has one in the "on" soak, none in the "off".
  on=$(grep -c "receive_standby: 1" "$work/out/lanes-standby-on-1.yaml")
  off=$(grep -c "receive_standby" "$work/out/lanes-standby-off-1.yaml")
  lanes=${layout%% *}
  if [ "$on" != "${lanes#LANES=}" ] || [ "$off" != 0 ]; then
    echo "FAIL ($layout): lanes-standby's configs have $on and $off standby threads"
    failed=1
  fi
  valid=$(grep -c "(dry run: valid)" "$log")
  if [ "$rc" != 0 ] || [ "$valid" != "$expected" ] || grep -qE "INVALID|VALIDATION FAILED|syntax error|unbound variable" "$log" ||
    grep "command not found" "$log" | grep -qv nvidia-smi; then
    cat "$log"
    echo "FAIL ($layout): run.sh exited $rc; $valid of $expected pipeline configs valid"
    failed=1
  else
    echo "ok ($layout): $valid pipeline configs valid, every mode ran dry"
  fi
done
exit $failed
