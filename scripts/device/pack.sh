#!/usr/bin/env bash
# Builds a Release tree here and packs what the lent GPU machine lacks into .device/:
# stripped binaries, the shared libraries it has no copy of (liburing, yaml-cpp 0.7, spdlog,
# fmt, Google Benchmark), the configs, and run.sh. The device has CUDA 13, rdma-core and FFTW.
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
for binary in $(find "$build" -type f -perm -u+x \( -name '*_test' -o -name '*_bench' -o -name sluice -o -name sluice-emulator \)); do
  strip -o ".device/bin/$(basename "$binary")" "$binary"
done
# Debian's Google Benchmark soname is libbenchmark.so.1debian. No `exit` in awk: under pipefail
# the SIGPIPE that ldconfig would get then fails the pipeline.
for library in liburing.so.2 libyaml-cpp.so.0.7 libspdlog.so.1.10 libfmt.so.9 libbenchmark.so.1debian libfftw3f.so.3; do
  path=$(ldconfig -p | awk -v name="$library" '$1 == name && !found { print $NF; found = 1 }')
  if [ -z "$path" ]; then
    echo "pack: $library not found here; the device lacks it too" >&2
    exit 1
  fi
  cp -L "$path" .device/lib/
done
cp -r configs .device/
cp scripts/device/run.sh .device/
du -sh .device
