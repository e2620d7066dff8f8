#!/usr/bin/env bash
# The main job: set everything up, then run the mission's dual-port pipeline (configs/dual_port.yaml)
# on whatever hardware is present: sluice starts the emulator, two lanes go udp → raw record →
# link → fft → spectra record, with live per-lane rates while it runs and the per-stage summary
# after. Then it draws the recorded spectra and says where everything is.
#   scripts/demo.sh [extra sluice run arguments, e.g. --set template.raw.enabled=false]
set -euo pipefail
cd "$(dirname "$0")/.."
# Only the two programs the demo runs: the tests and benchmarks are a separate, much longer build.
scripts/setup.sh --target sluice --target sluice-emulator build
out=build/demo
mkdir -p "$out"
capture="$out/capture"
build/cli/sluice run configs/dual_port.yaml \
  --set "template.record.directory=$capture" --set "template.raw.directory=$capture" \
  --report "$out/report.json" --plot "$out/rates.svg" "$@"
build/cli/sluice capture plot "$capture/dual_port.sigmf-collection" -o "$out/spectra.svg"
echo
echo "capture:  $capture/dual_port.sigmf-collection (spectra)"
[ -e "$capture/dual_port-raw.sigmf-collection" ] && echo "          $capture/dual_port-raw.sigmf-collection (raw samples)"
echo "pictures: $out/spectra.svg (averaged spectrum and spectrogram of the recording)"
echo "          $out/rates.svg (per-lane rates over the run)"
echo "report:   $out/report.json"
