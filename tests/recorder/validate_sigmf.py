#!/usr/bin/env python3
# Validates SigMF files against the official JSON schemas (draft 2020-12, python3-jsonschema).
# Usage: validate_sigmf.py SCHEMA_DIR FILE...  (FILE: .sigmf-meta or .sigmf-collection)
# Exit 0: all valid; 1: invalid (errors on stderr); 77: cannot validate here (skip).
import copy
import hashlib
import json
import os
import sys

SKIP = 77


def main():
    if len(sys.argv) < 3:
        print("usage: validate_sigmf.py SCHEMA_DIR FILE...", file=sys.stderr)
        return 2
    schema_dir = sys.argv[1]
    try:
        import jsonschema
    except ImportError:
        print("skip: python3-jsonschema is not installed", file=sys.stderr)
        return SKIP
    meta_schema_path = os.path.join(schema_dir, "sigmf-schema.json")
    collection_schema_path = os.path.join(schema_dir, "collection-schema.json")
    if not (os.path.exists(meta_schema_path) and os.path.exists(collection_schema_path)):
        print(f"skip: SigMF schemas not found in {schema_dir}", file=sys.stderr)
        return SKIP
    with open(meta_schema_path) as f:
        meta_schema = json.load(f)
    with open(collection_schema_path) as f:
        collection_schema = copy.deepcopy(json.load(f))
    # collection-schema.json (v1.2.5, $id says 1.2.0) describes each core:streams item as an array of
    # strings, while the spec text requires SigMF Recording Objects {"name", "hash"} (what Sluice and
    # sigmf-python write): that one property is replaced by the spec's Recording Object, and every
    # hash is checked below against the SHA-512 of the .sigmf-meta it names; the rest of the schema
    # applies unchanged.
    recording_object = {
        "type": "object",
        "required": ["name", "hash"],
        "properties": {"name": {"type": "string"}, "hash": {"type": "string", "pattern": "^[0-9a-fA-F]{128}$"}},
    }
    collection_schema["properties"]["collection"]["properties"]["core:streams"]["items"] = recording_object

    validator_class = jsonschema.Draft202012Validator
    meta_validator = validator_class(meta_schema, format_checker=validator_class.FORMAT_CHECKER)
    collection_validator = validator_class(collection_schema, format_checker=validator_class.FORMAT_CHECKER)
    failures = 0
    for path in sys.argv[2:]:
        with open(path) as f:
            document = json.load(f)
        validator = collection_validator if path.endswith(".sigmf-collection") else meta_validator
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
        for error in errors:
            print(f"{path}: {'/'.join(str(p) for p in error.path)}: {error.message}", file=sys.stderr)
        failures += len(errors)
        if path.endswith(".sigmf-collection"):
            home = os.path.dirname(path)
            for stream in document["collection"].get("core:streams", []):
                meta = os.path.join(home, stream["name"] + ".sigmf-meta")
                if not os.path.exists(meta):
                    print(f"{path}: stream {stream['name']}: {meta} missing", file=sys.stderr)
                    failures += 1
                    continue
                with open(meta, "rb") as f:
                    digest = hashlib.sha512(f.read()).hexdigest()
                if digest != stream["hash"].lower():
                    print(f"{path}: stream {stream['name']}: hash does not match {meta}", file=sys.stderr)
                    failures += 1
        else:
            data = path[: -len(".sigmf-meta")] + ".sigmf-data"
            if not os.path.exists(data):
                print(f"{path}: {data} missing", file=sys.stderr)
                failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
