#!/usr/bin/env bash
# Builds a Release tree here and packs what the lent GPU machine lacks into .device/:
# stripped binaries, fio, every shared library they load that the device has no copy of, the
# configs, and run.sh. The device (Ubuntu 24.04) has CUDA 13, rdma-core, FFTW and yaml-cpp 0.8,
# but not liburing, Google Benchmark, GoogleTest, spdlog, fmt, yaml-cpp 0.7 (what Debian 12
# links) or fio. Which libraries to pack is read from ldd, not listed by hand, so a new
# dependency is packed too; a library not found here stops the script.
#   SLUICE_DEVICE_BUILD=build   pack from an existing build tree instead (no Release configure)
#   SLUICE_DEVICE_TARGETS="fft_gpu_test fft_gpu_bench ..."   build and pack only these
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
done < <(find "$build" -type f -perm -u+x \( -name '*_test' -o -name '*_bench' -o -name sluice -o -name sluice-emulator -o -name udp_receive_loops \))
# recorder_bench compares against fio; run.sh puts .device/bin first on PATH.
cp "$(command -v fio)" .device/bin/fio

# Sonames a stock Ubuntu 24.04 host with CUDA, rdma-core and FFTW already has (glibc, the C++
# runtime, CUDA, verbs, FFTW, yaml-cpp 0.8 and the base system libraries fio's dependencies use).
base_sonames='^(linux-vdso\.so|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|'
base_sonames+='libstdc\+\+\.so|libgcc_s\.so|libcuda\.so|libcudart\.so|libcufft\.so|libnvidia|libibverbs\.so|'
base_sonames+='librdmacm\.so|libnl-3\.so|libnl-route-3\.so|libfftw3f?\.so|libyaml-cpp\.so\.0\.8|libz\.so|'
base_sonames+='libssl\.so|libcrypto\.so|libgnutls\.so|libp11-kit\.so|libidn2\.so|libunistring\.so|libtasn1\.so|'
base_sonames+='libnettle\.so|libhogweed\.so|libgmp\.so|liblzma\.so|libzstd\.so|libbz2\.so|libselinux\.so|'
base_sonames+='libpcre2-8\.so|libkeyutils\.so|libkrb5\.so|libkrb5support\.so|libk5crypto\.so|libgssapi_krb5\.so|'
base_sonames+='libcom_err\.so|libffi\.so|libudev\.so|libblkid\.so|libuuid\.so|libacl\.so|libjson-c\.so|libkmod\.so|'
base_sonames+='libdevmapper\.so|libcryptsetup\.so|libargon2\.so|libxml2\.so|libnuma\.so|libtirpc\.so|libicu)'

# ldd prints "soname => /path (address)"; awk reads all of its input (no early exit), so a
# pipeline here never dies of SIGPIPE under pipefail.
missing=$(for binary in .device/bin/*; do ldd "$binary"; done | awk '/not found/ { print $1 }' | sort -u)
if [ -n "$missing" ]; then
  echo "pack: not found here, so not packable: $missing" >&2
  exit 1
fi
packed=0
while read -r soname path; do
  if [[ $soname =~ $base_sonames ]]; then continue; fi
  cp -L "$path" .device/lib/
  packed=$((packed + 1))
done < <(for binary in .device/bin/*; do ldd "$binary"; done | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u)
echo "pack: $packed shared libraries: $(ls .device/lib | tr '\n' ' ')"
cp -r configs .device/
cp scripts/device/run.sh .device/
du -sh .device
