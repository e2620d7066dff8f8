#!/usr/bin/env bash
# Formats the tracked C++ and CUDA sources with clang-format (.clang-format at the top), or with
# --check lists the files it would change and fails if there are any.
#   scripts/format.sh [--check] [FILE...]   (default: every tracked .cpp, .hpp, .h, .cu, .cuh)
set -euo pipefail
cd "$(dirname "$0")/.."

check=false
if [ "${1:-}" = --check ]; then
  check=true
  shift
fi
command -v clang-format >/dev/null || {
  echo "format: clang-format is missing (apt-get install clang-format)" >&2
  exit 2
}
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh')
fi

if ! $check; then
  clang-format -i --style=file "${files[@]}"
  exit 0
fi
unformatted=()
for file in "${files[@]}"; do
  clang-format --style=file --dry-run --Werror "$file" >/dev/null 2>&1 || unformatted+=("$file")
done
if ((${#unformatted[@]})); then
  printf '%s\n' "${unformatted[@]}"
  echo "format: ${#unformatted[@]} file(s) not formatted (scripts/format.sh formats them)" >&2
  exit 1
fi
