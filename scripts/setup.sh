#!/usr/bin/env bash
# Installs what Sluice needs on Debian 12 or Ubuntu 24.04 (as root or through sudo), then
# configures and builds it (everything, or only the targets named). Safe to run again: it installs
# only what is missing.   scripts/setup.sh [--target NAME]... [BUILD_DIR] [extra cmake arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."

targets=()
while [ "${1:-}" = --target ]; do
  [ $# -ge 2 ] || { echo "sluice setup: --target needs a target name" >&2; exit 2; }
  targets+=(--target "$2")
  shift 2
done
build_dir=${1:-build}
shift || true

packages=(
  build-essential cmake ninja-build pkg-config git
  liburing-dev libyaml-cpp-dev libfftw3-dev
  libibverbs-dev librdmacm-dev rdma-core perftest
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev libssl-dev
  libcpp-httplib-dev libpng-dev prometheus prometheus-cpp-dev
  clang fio python3 python3-jsonschema python3-numpy  # numpy: docs/examples/read_sigmf.py and its test
  clang-format-14 universal-ctags  # scripts/format.sh (pinned: Debian 12 and Ubuntu 24.04 agree) and check_functions.sh
  # The Soft-RoCE test VM (tests/vm/): qemu, an initramfs, verbs tools run inside it.
  qemu-system-x86 busybox-static cpio xz-utils perftest ibverbs-providers ibverbs-utils iproute2
  e2fsprogs xfsprogs util-linux
)

# The dashboard test drives a headless browser: Debian packages it as chromium, Ubuntu as chromium-browser.
# Decided by the release, not by apt-cache: a fresh machine has no package lists before the update below.
if . /etc/os-release && [ "${ID:-}" = ubuntu ]; then packages+=(chromium-browser); else packages+=(chromium); fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "sluice setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# tests/recorder/preallocation_test counts the kernel's io_uring tracepoints through tracefs, which
# some machines leave unmounted: as root, mount it where the kernel offers it.
if [ "$(id -u)" -eq 0 ] && [ -d /sys/kernel/tracing ] && [ ! -e /sys/kernel/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing || echo "sluice setup: could not mount tracefs on /sys/kernel/tracing" >&2
fi

# The CUDA toolkit is optional: CMake finds it under /usr/local/cuda when it is there.
cmake -S . -B "$build_dir" -G Ninja "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
