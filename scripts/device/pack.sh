#!/usr/bin/env bash
# Builds a Release tree and packs what the lent GPU host lacks into .device/: stripped binaries, fio,
# the shared libraries they load that the host has no copy of (from ldd), the configs and run.sh.
#   SLUICE_DEVICE_BUILD=build (pack an existing tree)   SLUICE_DEVICE_TARGETS="fft_gpu_test ..." (only these)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${SLUICE_DEVICE_BUILD:-build-device}
if [ "$build" = build-device ]; then
  cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DSLUICE_WERROR=ON >/dev/null
fi
# shellcheck disable=SC2086 # a list of targets
cmake --build "$build" -j "$(nproc)" ${SLUICE_DEVICE_TARGETS:+--target $SLUICE_DEVICE_TARGETS}
rm -rf .device && mkdir -p .device/bin .device/lib
while IFS= read -r binary; do
  strip -o ".device/bin/$(basename "$binary")" "$binary"
done < <(find "$build" -type f -perm -u+x \( -name '*_test' -o -name '*_probe' -o -name '*_bench' -o -name sluice -o -name sluice-emulator -o -name udp_receive_loops -o -name core_pairs \))
# recorder_bench compares against fio; run.sh puts .device/bin first on PATH.
cp "$(command -v fio)" .device/bin/fio

# The host (Ubuntu 24.04) lacks liburing, Google Benchmark, GoogleTest, spdlog, fmt, yaml-cpp 0.7 (what
# Debian 12 links) and fio; libraries are read from ldd, not listed, so a new dependency is packed
# too, and one not found here stops the script.
# Sonames the lent host (Ubuntu 24.04, the 'cuda' image with rdma-core and FFTW) has itself: glibc,
# the C++ runtime, CUDA, verbs, FFTW, yaml-cpp 0.8, and base libraries that ldd there found for the
# packed fio. A library taken from the host brings its own dependencies, so what such a library
# needs here (Debian 12's libunistring.so.2, libicuuc.so.72: Ubuntu 24.04 has .so.5 and .so.74)
# is neither listed nor packed. Not listed, so packed: libaio.so.1 (Ubuntu 24.04's is
# libaio.so.1t64), libcryptsetup and libtirpc (not in the image) and what only they lead to
# (device-mapper, argon2, json-c; the Kerberos libraries).
host_sonames='^(linux-vdso\.so|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|'
host_sonames+='libstdc\+\+\.so|libgcc_s\.so|libcuda\.so|libcudart\.so|libcufft\.so|libnvidia|libibverbs\.so|'
host_sonames+='librdmacm\.so|libnl-3\.so|libnl-route-3\.so|libfftw3f?\.so|libyaml-cpp\.so\.0\.8|libz\.so|'
host_sonames+='libssl\.so|libcrypto\.so|libgnutls\.so|liblzma\.so|libzstd\.so|libbz2\.so|libselinux\.so|'
host_sonames+='libudev\.so|libblkid\.so|libuuid\.so|libacl\.so|libxml2\.so|libnuma\.so)'

# ldd prints "soname => /path (address)"; awk reads all of its input (no early exit), so a
# pipeline here never dies of SIGPIPE under pipefail.
ldd_all=$(for binary in .device/bin/*; do ldd "$binary"; done)
missing=$(awk '/not found/ { print $1 }' <<<"$ldd_all" | sort -u)
if [ -n "$missing" ]; then
  echo "pack: not found here, so not packable: $missing" >&2
  exit 1
fi
declare -A path_of
while read -r soname path; do path_of[$soname]=$path; done < <(awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' <<<"$ldd_all")
needed() { readelf --dynamic "$1" | awk '/\(NEEDED\)/ { gsub(/[][]/, "", $5); print $5 }'; }
# From each binary's own needs down: a host library ends the walk there; any other is packed and
# its needs walked in turn.
declare -A seen
queue=()
for binary in .device/bin/*; do mapfile -t -O "${#queue[@]}" queue < <(needed "$binary"); done
packed=0
while [ "${#queue[@]}" -gt 0 ]; do
  soname=${queue[0]}
  queue=("${queue[@]:1}")
  if [ -n "${seen[$soname]:-}" ] || [[ $soname =~ $host_sonames ]]; then continue; fi
  seen[$soname]=1
  cp -L "${path_of[$soname]}" ".device/lib/$soname"
  packed=$((packed + 1))
  mapfile -t -O "${#queue[@]}" queue < <(needed ".device/lib/$soname")
done
echo "pack: $packed shared libraries: $(cd .device/lib && echo *)"
cp -r configs .device/
cp scripts/device/run.sh scripts/volumes.sh .device/
mkdir -p .device/modes && cp scripts/device/modes/*.sh .device/modes/ 2>/dev/null || true
# Every packed binary loaded, and fio run, in a chroot with only the host's libraries and the pack.
scripts/device/check_pack.sh .device "$host_sonames"
du -sh .device
