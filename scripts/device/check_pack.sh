#!/usr/bin/env bash
# Checks a packed folder in a chroot holding only the loader, the libraries HOST_REGEX says the lent
# host has (with what they need) and the pack: every binary resolves its libraries, fio runs.
#   scripts/device/check_pack.sh PACK_DIR HOST_REGEX    (root: it uses chroot; pack.sh calls it)
set -euo pipefail
pack=$(cd "$1" && pwd -P)
host_sonames=$2
[ "$(id -u)" -eq 0 ] || { echo "check_pack: needs root (chroot)" >&2; exit 1; }
root=$(mktemp -d "$pack.check.XXXXXX")
trap 'rm -rf "$root"' EXIT
libdir=$root/usr/lib/x86_64-linux-gnu
mkdir -p "$libdir" "$root/lib64" "$root/tmp" "$root/dev" "$root/pack"
ln -s usr/lib "$root/lib"

# Hard links where the file system allows (CUDA's libraries are large), copies elsewhere.
place() { cp --link -L "$1" "$2" 2>/dev/null || cp -L "$1" "$2"; }
place /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
cp -a "$pack/." "$root/pack/"
touch "$root/dev/null"

needed() { readelf --dynamic "$1" | awk '/\(NEEDED\)/ { gsub(/[][]/, "", $5); print $5 }'; }
# The host's libraries: each one the pack asks for by a host soname, and everything it needs here.
# Where each soname resolves here: ldd of the binaries lists every library they load.
declare -A path_of
while read -r soname path; do path_of[$soname]=$path; done < <(
  for binary in "$pack"/bin/*; do ldd "$binary"; done | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u)
declare -A placed
place_library() {  # place_library SONAME PATH
  [ -z "${placed[$1]:-}" ] || return 0
  placed[$1]=1
  place "$2" "$libdir/$1"
}
while read -r soname; do
  [ -n "${path_of[$soname]:-}" ] || continue  # the loader itself
  place_library "$soname" "${path_of[$soname]}"
  while read -r name path; do place_library "$name" "$path"; done < <(
    ldd "${path_of[$soname]}" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')
done < <(for file in "$pack"/bin/* "$pack"/lib/*; do needed "$file"; done | sort -u | grep -E "$host_sonames")

status=0
for binary in "$pack"/bin/*; do
  name=$(basename "$binary")
  # The loader stops at the first library it cannot find and says which.
  if ! listing=$(chroot "$root" /lib64/ld-linux-x86-64.so.2 --library-path /pack/lib --list "/pack/bin/$name" 2>&1) ||
      grep -q "not found" <<<"$listing"; then
    echo "check_pack: $name on the host: $(grep -E "not found|error while loading" <<<"$listing")" >&2
    status=1
  fi
done
for engine in libaio io_uring; do
  if ! output=$(chroot "$root" /lib64/ld-linux-x86-64.so.2 --library-path /pack/lib /pack/bin/fio --name=check --ioengine="$engine" --rw=read \
      --size=1M --bs=64k --filename=/tmp/check.dat --output-format=terse 2>&1); then
    echo "check_pack: fio --ioengine=$engine did not run with only the host's libraries and the pack: $output" >&2
    status=1
  fi
done
[ "$status" -eq 0 ] && echo "check_pack: every binary resolves its libraries from the pack and the host list; fio reads with libaio and io_uring"
exit "$status"
