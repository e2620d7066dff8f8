#!/usr/bin/env bash
# The demo: set up, run the dual-port pipeline (configs/dual_port.yaml: emulator, two lanes of udp →
# raw record → link → fft → spectra record) on whatever hardware is present, then draw its spectra.
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
