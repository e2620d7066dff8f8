#!/usr/bin/env python3
# Reads a SigMF collection as an outside tool does (numpy.memmap of every data file it lists), and
# checks it lists exactly the recordings in its directories (a striped capture's volumes).
# Usage: map_collection.py NAME.sigmf-collection   Exit 0: readable; 1: not (why on stderr); 77: no numpy.
import glob
import json
import os
import sys

SKIP = 77
DTYPES = {"ci8": "i1", "ci16_le": "<i2", "cf32_le": "<f4", "rf32_le": "<f4"}
COMPONENTS = {"ci8": 2, "ci16_le": 2, "cf32_le": 2, "rf32_le": 1}


def main():
    if len(sys.argv) != 2:
        print("usage: map_collection.py NAME.sigmf-collection", file=sys.stderr)
        return 2
    try:
        import numpy
    except ImportError:
        print("skip: numpy is not installed", file=sys.stderr)
        return SKIP
    path = sys.argv[1]
    home = os.path.dirname(path)
    name = os.path.basename(path)[: -len(".sigmf-collection")]
    with open(path, encoding="utf-8") as handle:
        streams = json.load(handle)["collection"]["core:streams"]
    listed = sorted(os.path.normpath(os.path.join(home, stream["name"])) for stream in streams)
    directories = {os.path.normpath(home)} | {os.path.dirname(base) for base in listed}
    # NAME-*.sigmf-meta and NAME-*.sigmf-data in the collection's directory and in every directory it
    # lists a recording in.
    on_disk = set()
    for directory in directories:
        for suffix in (".sigmf-meta", ".sigmf-data"):
            pattern = os.path.join(glob.escape(directory), glob.escape(name) + "-*" + suffix)
            on_disk |= {os.path.normpath(path[: -len(suffix)]) for path in glob.glob(pattern)}
    on_disk = sorted(on_disk)
    failures = []
    if listed != on_disk:
        failures.append(f"the collection lists {listed}, the directories hold {on_disk}")
    samples = 0
    for base in listed:
        with open(base + ".sigmf-meta", encoding="utf-8") as handle:
            datatype = json.load(handle)["global"]["core:datatype"]
        try:  # an empty data file cannot be mapped: a failure, as for an outside reader
            values = numpy.memmap(base + ".sigmf-data", dtype=DTYPES[datatype], mode="r")
        except (OSError, ValueError) as error:
            failures.append(f"{base}.sigmf-data: {error}")
            continue
        samples += len(values) // COMPONENTS[datatype]
    for failure in failures:
        print(failure, file=sys.stderr)
    print(json.dumps({"recordings": len(listed), "samples": samples}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
