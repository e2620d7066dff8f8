#!/usr/bin/env bash
# The main job: set everything up, then run the default demo pipeline on whatever hardware
# is present (two lanes; GPU memory where a GPU answers, host memory otherwise).
#   scripts/demo.sh [extra sluice run arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
exec build/cli/sluice run configs/demo.yaml --report build/demo-report.json --plot build/demo-rates.svg "$@"
