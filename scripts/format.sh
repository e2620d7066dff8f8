#!/usr/bin/env bash
# Formats the tracked C++ and CUDA sources with clang-format (.clang-format at the top), or with
# --check lists the files it would change and fails if there are any.
#   scripts/format.sh [--check] [FILE...]   (default: every tracked .cpp, .hpp, .h, .cu, .cuh)
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned: clang-format 14 is Debian 12's default and an Ubuntu 24.04 package, and another version
# formats some constructs differently, so a tree it formats would fail the check.
clang_format=clang-format-14
check=false
if [ "${1:-}" = --check ]; then
  check=true
  shift
fi
command -v "$clang_format" >/dev/null || {
  echo "format: $clang_format is missing (apt-get install $clang_format, or scripts/setup.sh)" >&2
  exit 2
}
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh')
fi

if ! $check; then
  printf '%s\0' "${files[@]}" | xargs -0 -r -P "$(nproc)" -n 32 "$clang_format" -i --style=file
  exit 0
fi
# One call per 32 files, in parallel, each writing its own report (parallel writes to one pipe
# interleave): --dry-run --Werror reports each change as "FILE:LINE:COLUMN: error: code should be
# clang-formatted".
reports=$(mktemp -d)
trap 'rm -rf "$reports"' EXIT
status=0
printf '%s\0' "${files[@]}" | xargs -0 -r -P "$(nproc)" -n 32 sh -c '"$0" --style=file --dry-run --Werror "$@" 2>"$(mktemp -p '"$reports"')"' \
  "$clang_format" || status=$?
if ((status != 0)); then
  unformatted=$(cat "$reports"/* | grep -oE '^[^:]+:[0-9]+:[0-9]+: error: code should be clang-formatted' | cut -d: -f1 |
    sort -u || true)
  if [ -z "$unformatted" ]; then
    cat "$reports"/* >&2  # clang-format failed for another reason (a missing file, a bad .clang-format)
    echo "format: $clang_format failed" >&2
    exit 2
  fi
  printf '%s\n' "$unformatted"
  echo "format: $(wc -l <<<"$unformatted") file(s) not formatted (scripts/format.sh formats them)" >&2
  exit 1
fi
