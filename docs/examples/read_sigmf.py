#!/usr/bin/env python3
"""Read one recording of a Sluice capture with numpy (docs/GNURADIO.md).

Usage: read_sigmf.py CAPTURE.sigmf-meta
Prints one JSON line: datatype, sample rate, centre frequency, sample count, lost samples
and the strongest frequency in the first 65536 samples (Hz, relative to the centre).
"""
import json
import sys

import numpy as np

# SigMF datatype -> how numpy reads the .sigmf-data file.
#   ci16_le: interleaved little-endian int16 I, Q  -> read as '<i2', pair up into complex
#   cf32_le: little-endian complex float32         -> read as '<c8' directly
DTYPES = {"ci16_le": np.dtype("<i2"), "cf32_le": np.dtype("<c8")}


def read(meta_path):
    base = meta_path[: -len(".sigmf-meta")] if meta_path.endswith(".sigmf-meta") else meta_path
    with open(base + ".sigmf-meta", encoding="utf-8") as handle:
        meta = json.load(handle)
    glob = meta["global"]
    datatype = glob["core:datatype"]
    raw = np.fromfile(base + ".sigmf-data", dtype=DTYPES[datatype])
    if datatype == "ci16_le":
        samples = raw[0::2].astype(np.float32) + 1j * raw[1::2].astype(np.float32)
    else:
        samples = raw
    return meta, samples


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: read_sigmf.py CAPTURE.sigmf-meta")
    meta, samples = read(sys.argv[1])
    glob = meta["global"]
    rate = glob["core:sample_rate"]
    frequency = meta["captures"][0].get("core:frequency", 0.0)
    window = samples[:65536]
    spectrum = np.abs(np.fft.fft(window))
    peak = np.fft.fftfreq(len(window), d=1.0 / rate)[int(np.argmax(spectrum))]
    print(json.dumps({
        "datatype": glob["core:datatype"],
        "sample_rate": rate,
        "frequency": frequency,
        "samples": int(len(samples)),
        "lost_samples": glob.get("sluice:lost_samples", 0),
        "peak_hz": float(peak),
    }))


if __name__ == "__main__":
    main()
