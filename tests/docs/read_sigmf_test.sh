#!/bin/bash
# Runs docs/examples/read_sigmf.py on a real capture Sluice records (a 1 MHz generator tone
# at 16 Msps) and checks what it reads against the tone and rate Sluice was told to make.
# Without numpy it skips (exit 77), except under CI=true, where that is a failure.
set -euo pipefail
sluice="$1"; source_dir="$2"
# The python3 on PATH (a pyenv, a venv) may lack numpy where Debian's python3-numpy is installed.
python=
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c "import numpy" 2>/dev/null; then python=$candidate; break; fi
done
if [ -z "$python" ]; then
  if [ "${CI:-}" = "true" ]; then echo "python3-numpy missing (scripts/setup.sh installs it)"; exit 1; fi
  echo "python3-numpy missing: skipped"; exit 77
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cat > "$work/pipeline.yaml" <<YAML
pipeline: {name: pyread, chunk: 1MiB, chunks: 8}
lanes:
  - name: a
    stages:
      - {type: generator, signal: tone, sample_rate: 16Msps, frequency: 1MHz, format: ci16, stop_after: 4MiB}
      - {type: record, directory: $work/capture, overwrite: true}
YAML
"$sluice" run "$work/pipeline.yaml" > "$work/run.log" 2>&1 || { cat "$work/run.log"; exit 1; }
meta=$(ls "$work"/capture/pyread-a-*.sigmf-meta | head -1)
out=$("$python" "$source_dir/docs/examples/read_sigmf.py" "$meta")
echo "$out"
"$python" - "$out" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
assert r["datatype"] == "ci16_le", r
assert r["sample_rate"] == 16e6, r
assert r["samples"] == 4 * 1024 * 1024 // 4, r          # 4 MiB of 4-byte ci16 samples
assert abs(r["peak_hz"] - 1e6) <= 16e6 / 65536, r       # within one FFT bin of the tone
assert r["lost_samples"] == 0, r
PY
