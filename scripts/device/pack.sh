#!/usr/bin/env bash
# Builds a Release tree here and packs what the lent GPU machine lacks into .device/:
# stripped binaries, the shared libraries it has no copy of (liburing, yaml-cpp 0.7, spdlog,
# fmt, Google Benchmark), the configs, and run.sh. The device has CUDA 13, rdma-core and FFTW.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DSLUICE_WERROR=ON >/dev/null
cmake --build build-device -j "$(nproc)"
rm -rf .device && mkdir -p .device/bin .device/lib
for binary in $(find build-device -type f -perm -u+x \( -name '*_test' -o -name '*_bench' -o -name sluice -o -name sluice-emulator \)); do
  strip -o ".device/bin/$(basename "$binary")" "$binary"
done
# Debian's Google Benchmark soname is libbenchmark.so.1debian.
# cpp-httplib (and the brotli it was built with) serves /metrics; libpng draws capture plots.
for library in liburing.so.2 libyaml-cpp.so.0.7 libspdlog.so.1.10 libfmt.so.9 libbenchmark.so.1debian libfftw3f.so.3 \
    libcpp-httplib.so.0.11 libbrotlidec.so.1 libbrotlienc.so.1 libbrotlicommon.so.1 libpng16.so.16; do
  path=$(ldconfig -p | awk -v name="$library" '$1 == name { print $NF; exit }')
  if [ -z "$path" ]; then
    echo "pack: $library not found here; the device lacks it too" >&2
    exit 1
  fi
  cp -L "$path" .device/lib/
done
cp -r configs .device/
cp scripts/device/run.sh .device/
du -sh .device
