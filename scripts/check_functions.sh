#!/usr/bin/env bash
# Lists C++ and CUDA functions longer than a limit (default 60 lines) and fails unless each says why
# at its top: a comment starting "// Long because" just above it or on its first line.
#   scripts/check_functions.sh [--limit N] [PATH...]   (default: the source rooms and bench/)
set -euo pipefail
cd "$(dirname "$0")/.."

limit=60
if [ "${1:-}" = --limit ]; then
  limit=$2
  shift 2
fi
paths=("$@")
[ ${#paths[@]} -gt 0 ] || paths=(pipeline wire stages recorder emulator monitor suite cli bench)
# Function extents come from universal-ctags: pmccabe misparses C++17 nested namespaces and
# `for (;;)`, and clang-tidy needs a full configure. Called by its own name: `ctags` may be another
# ctags (Exuberant, Emacs's etags) through alternatives.
ctags=ctags-universal
command -v "$ctags" >/dev/null || {
  echo "check_functions: $ctags is missing (apt-get install universal-ctags, or scripts/setup.sh)" >&2
  exit 2
}

# One line per function: file, first line, last line, name.
"$ctags" -R --languages=C++ --langmap=C++:+.cu --kinds-C++=f --fields=+ne --extras=-F -o - "${paths[@]}" |
  awk -F'\t' '{
    first = ""; last = ""
    for (i = 4; i <= NF; i++) {
      if ($i ~ /^line:/) first = substr($i, 6)
      if ($i ~ /^end:/) last = substr($i, 5)
    }
    if (first != "" && last != "") print $2 "\t" first "\t" last "\t" $1
  }' | sort -t$'\t' -k1,1 -k2,2n |
  awk -F'\t' -v limit="$limit" '
    function excused(file, first,    line, n, i, lines, body) {
      # The comment block right above the function (its lines up to the first that is not a
      # comment) and the function'"'"'s first two lines.
      n = 0
      while ((getline line < file) > 0) { n++; lines[n] = line; if (n > first + 1) break }
      close(file)
      for (i = first - 1; i > 0 && lines[i] ~ /^[ \t]*\/\//; i--) if (lines[i] ~ /\/\/ Long because/) return 1
      for (i = first; i <= first + 1 && i <= n; i++) if (lines[i] ~ /\/\/ Long because/) return 1
      return 0
    }
    {
      length_ = $3 - $2 + 1
      if (length_ <= limit) next
      if (excused($1, $2)) { printf "ok    %4d lines  %s:%d  %s (a reason at its top)\n", length_, $1, $2, $4; next }
      printf "LONG  %4d lines  %s:%d  %s\n", length_, $1, $2, $4
      bad++
    }
    END {
      if (bad) {
        printf "check_functions: %d function(s) over %d lines without a \"// Long because\" comment at their top\n", bad, limit
        exit 1
      }
    }'
