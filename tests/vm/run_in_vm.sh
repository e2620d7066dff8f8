#!/usr/bin/env bash
# Runs one command inside a throw-away qemu VM whose kernel has Soft-RoCE (rdma_rxe), so verbs
# code runs against a real RDMA stack on a machine whose own kernel has none (--help says how).
#   tests/vm/run_in_vm.sh [OPTIONS] -- COMMAND [ARG]...   exit: the command's, 125 VM failed, 77 no qemu
set -Eeuo pipefail
# A harness step that fails unexpectedly is a VM failure, said aloud, never a silent exit 1.
trap 'echo "run_in_vm: unexpected failure at line $LINENO (exit $?)" >&2; exit 125' ERR

here=$(cd "$(dirname "$0")" && pwd)
readonly kVmFailed=125 kSkip=77
cpus=2
mem=""  # MiB; by default sized to the initramfs below
timeout_s=300
cache=${SLUICE_VM_CACHE:-$here/../../build/vm-cache}
show_console=0
prepare_only=0
extra_bins=()
extra_files=()

usage() {
  cat >&2 <<'USAGE'
Runs one command inside a throw-away qemu VM whose kernel has Soft-RoCE (rdma_rxe), so verbs
code runs against a real RDMA stack on a machine whose own kernel has none.
  tests/vm/run_in_vm.sh [--cpus N] [--mem MiB] [--timeout S] [--cache DIR] [--bin PATH]...
                        [--file PATH]... [--console] -- COMMAND [ARG]...
  tests/vm/run_in_vm.sh [--cache DIR] --prepare     (only fetch the kernel; same exit codes)
Defaults: 2 vCPUs, memory sized to the initramfs (at least 128 MiB), a 300 s timeout.
The guest boots Debian's kernel (tests/vm/prepare_vm.sh) under TCG with a busybox initramfs,
loads the RDMA modules and sch_netem (tc's netem), makes dummy0 (MTU 9000, 192.0.2.1/24) and
rxe0 on it, then runs COMMAND as root in the same working directory as here. COMMAND, every
argument that names an existing file, each --bin (with their shared libraries) and each --file
are copied into the initramfs at their own paths, so the command line works unchanged. There
is no network (-nic none). The command's stdout and stderr come out on this script's stdout
and stderr.
Exit status: the command's own, or
  125  the VM failed: qemu error, guest panic, set-up failure in the guest, or timeout
   77  qemu cannot run on this machine at all (a skip; under CI=true this is 125 instead)
Environment: SLUICE_VM_CACHE (cache dir), SLUICE_VM_QEMU (the qemu binary). In the guest,
SLUICE_VM_ADDRESS=192.0.2.1 and SLUICE_IN_VM=1 (a missing RDMA device is a failure there).
USAGE
  exit 2
}
vm_fail() { echo "run_in_vm: $*" >&2; exit $kVmFailed; }

while (($#)); do
  case $1 in
    --cpus|--mem|--timeout|--cache|--bin|--file)
      (($# >= 2)) || { echo "run_in_vm: $1 needs a value" >&2; exit 2; } ;;&
    --cpus) cpus=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --bin) extra_bins+=("$2"); shift 2 ;;
    --file) extra_files+=("$2"); shift 2 ;;
    --console) show_console=1; shift ;;
    --prepare) prepare_only=1; shift ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *) echo "run_in_vm: unknown option '$1' (the command goes after --)" >&2; usage ;;
  esac
done
(($# || prepare_only)) || { echo "run_in_vm: no command given" >&2; usage; }
[[ $cpus =~ ^[1-9][0-9]*$ ]] || { echo "run_in_vm: --cpus wants a positive integer, got '$cpus'" >&2; exit 2; }
[[ -z $mem || $mem =~ ^[1-9][0-9]*$ ]] || { echo "run_in_vm: --mem wants MiB as a positive integer, got '$mem'" >&2; exit 2; }
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || { echo "run_in_vm: --timeout wants seconds, got '$timeout_s'" >&2; exit 2; }

qemu=$(command -v "${SLUICE_VM_QEMU:-qemu-system-x86_64}" || true)
accelerators=""
if [ -n "$qemu" ]; then accelerators=$("$qemu" -accel help 2>/dev/null || true); fi
if ! grep -qx tcg <<< "$accelerators"; then
  reason="qemu-system-x86_64 with TCG is not available here (apt-get install qemu-system-x86)"
  if [ "${CI:-}" = "true" ]; then
    vm_fail "$reason; CI=true, so this is a failure, not a skip"
  fi
  echo "run_in_vm: SKIP: $reason" >&2
  exit $kSkip
fi

"$here/prepare_vm.sh" "$cache" || vm_fail "preparing the kernel failed (tests/vm/prepare_vm.sh $cache)"
cache=$(cd "$cache" && pwd)
((prepare_only)) && exit 0

work=$(mktemp -d "${TMPDIR:-/tmp}/sluice-vm.XXXXXX")
qemu_pid=""
cleanup() {
  if [ -n "$qemu_pid" ]; then kill "$qemu_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
# CTest's timeout or Ctrl-C: leave through the EXIT trap, so qemu does not outlive us.
trap 'exit 125' TERM INT HUP
root=$work/root

# The initramfs mirrors the host's merged-/usr layout, so a path ldd prints (/lib/...) and the
# one a program was linked against (/usr/lib/...) both resolve inside the guest.
mkdir -p "$root"/{usr/bin,usr/sbin,usr/lib,usr/lib64,proc,sys,dev,tmp,root,etc,sluice}
for dir in bin sbin lib lib64; do
  if [ -L "/$dir" ]; then
    ln -s "$(readlink "/$dir" | sed 's|^/||')" "$root/$dir"
  else
    mkdir -p "$root/$dir"
  fi
done

# The guest links busybox's applets itself (--install never replaces a file copied here).
cp "$cache/busybox" "$root/bin/busybox"
ln -s busybox "$root/bin/sh"

mkdir -p "$root/lib/sluice-vm"
cp "$cache"/modules/*.ko "$cache/modules/order" "$root/lib/sluice-vm/"

declare -A copied=()
# Copies a host file to the same path in the guest (symlinks followed), replacing any busybox
# applet of that name: what the caller names wins.
copy_file() {
  local path=$1
  [ -n "${copied[$path]:-}" ] && return 0
  copied[$path]=1
  mkdir -p "$root$(dirname "$path")"
  cp -L --remove-destination "$path" "$root$path"
}
is_elf() { [ "$(head -c 4 "$1" 2>/dev/null | od -An -tx1 | tr -d ' ')" = "7f454c46" ]; }
# Copies an ELF file and every shared library ldd resolves for it (and the loader).
copy_with_libraries() {
  local path=$1 lib
  copy_file "$path"
  is_elf "$path" || return 0
  while read -r lib; do
    [ -n "$lib" ] && copy_file "$lib"
  done < <(ldd "$path" 2>/dev/null | awk '/=> \// { print $3 } /^\t\/[^ ]+ \(/ { print $1 }')
  local missing
  missing=$(ldd "$path" 2>/dev/null | grep 'not found' || true)
  if [ -n "$missing" ]; then
    echo "$missing" >&2
    vm_fail "$path needs libraries this machine lacks"
  fi
}
find_program() {
  local name=$1
  case $name in
    */*) [ -f "$name" ] && realpath -s "$name" ;;
    *) PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin type -P "$name" ;;
  esac
}

# What verbs needs beyond ldd's view: glibc dlopens libgcc_s for unwinding and thread
# cancellation, libibverbs dlopens its provider (rxe) named by /etc/libibverbs.d/rxe.driver.
# (No early exit in these pipelines: under pipefail the writer's SIGPIPE would fail them.)
libgcc=$(ldconfig -p | awk '/libgcc_s.so.1 .*x86-64/ && !found { print $NF; found = 1 }')
[ -n "$libgcc" ] || vm_fail "libgcc_s.so.1 not found (ldconfig -p)"
copy_file "$libgcc"
provider=$(compgen -G '/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so' || compgen -G '/usr/lib64/libibverbs/librxe-rdmav*.so' || true)
provider=${provider%%$'\n'*}
[ -n "$provider" ] || vm_fail "the rxe verbs provider is missing (apt-get install ibverbs-providers)"
copy_with_libraries "$provider"
[ -f /etc/libibverbs.d/rxe.driver ] || vm_fail "/etc/libibverbs.d/rxe.driver is missing (apt-get install ibverbs-providers)"
copy_file /etc/libibverbs.d/rxe.driver
rdma_tool=$(find_program rdma) || vm_fail "the rdma tool is missing (apt-get install iproute2)"
copy_with_libraries "$rdma_tool"

for bin in "${extra_bins[@]}"; do
  path=$(find_program "$bin") || vm_fail "--bin $bin: no such program"
  copy_with_libraries "$path"
done
for file in "${extra_files[@]}"; do
  [ -f "$file" ] || vm_fail "--file $file: no such file"
  copy_file "$(realpath -s "$file")"
done
# A bare name that busybox provides (sh, awk, ...) runs as busybox's applet; a path, or --bin,
# brings the host's program instead.
applets=$("$cache/busybox" --list)
if [[ $1 == */* ]] || ! grep -qx -- "$1" <<< "$applets"; then
  program=$(find_program "$1") || vm_fail "command '$1' is neither a program here nor a busybox applet"
  copy_with_libraries "$program"
fi
for arg in "${@:2}"; do
  if [ -f "$arg" ]; then
    copy_with_libraries "$(realpath -s "$arg")"
  fi
done

# The command, quoted for the guest's sh (busybox ash: single quotes only).
quote() { local s=${1//\'/\'\\\'\'}; printf "'%s' " "$s"; }
{
  printf 'cd %s || exit 126\n' "$(quote "$PWD")"
  printf 'exec '
  for arg in "$@"; do quote "$arg"; done
  printf '\n'
} > "$root/sluice/command"
mkdir -p "$root$PWD"

cat > "$root/init" <<'EOF'
#!/bin/sh
# PID 1 of the test VM: mounts, RDMA modules, dummy0 + rxe0, the command, a result marker.
/bin/busybox --install -s
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb
export SLUICE_IN_VM=1 SLUICE_VM_ADDRESS=192.0.2.1
fail() {
  echo "SLUICE_VM_SETUP_FAILED: $*"
  poweroff -f
}
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# No tmpfs over /tmp: the initramfs root is already in memory and writable, and a mount there
# would hide what was copied under /tmp at its host path (a checkout or build tree in /tmp).
mkdir -p /dev/shm /dev/pts
mount -t tmpfs tmpfs /dev/shm
for module in $(cat /lib/sluice-vm/order); do
  insmod /lib/sluice-vm/$module.ko || fail "insmod $module"
done
ip link set lo up || fail "ip link set lo up"
# dummy creates dummy0 on load. MTU 9000 lets rxe use a 4096-byte RoCE MTU; rdma_cm cannot
# route to 127.0.0.1, so the peers meet on 192.0.2.1.
ip link set dummy0 mtu 9000 up || fail "ip link set dummy0 up"
ip addr add 192.0.2.1/24 dev dummy0 || fail "ip addr add 192.0.2.1/24"
rdma link add rxe0 type rxe netdev dummy0 || fail "rdma link add rxe0"
stty -F /dev/ttyS1 raw -echo || fail "stty ttyS1"
stty -F /dev/ttyS2 raw -echo || fail "stty ttyS2"
echo "SLUICE_VM_BEGIN"
sh /sluice/command </dev/null >/dev/ttyS1 2>/dev/ttyS2
rc=$?
echo "SLUICE_VM_RESULT $rc"
poweroff -f
EOF
chmod +x "$root/init"

(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet) > "$work/initramfs.cpio" ||
  vm_fail "building the initramfs failed"

# The guest holds the initramfs twice while unpacking it (the image and its files) beside a
# kernel that needs ~90 MiB to run perftest at 4 MiB messages: 128 MiB for a small one, more
# for, say, a sanitizer build whose libraries alone are 17 MiB.
initramfs_mib=$(( ($(stat -c %s "$work/initramfs.cpio") + 1048575) / 1048576 ))
if [ -z "$mem" ]; then
  mem=$(( 100 + 2 * initramfs_mib ))
  (( mem >= 128 )) || mem=128
fi

mkfifo "$work/stdout" "$work/stderr" "$work/console.fifo"
cat "$work/stdout" &
cat_out=$!
cat "$work/stderr" >&2 &
cat_err=$!
if ((show_console)); then
  tee "$work/console" < "$work/console.fifo" >&2 &
else
  cat "$work/console.fifo" > "$work/console" &
fi
cat_console=$!

# TCG: /dev/kvm here may be a nested-virtualisation module Debian's kernel cannot boot under.
# The uncompressed vmlinux boots through PVH, skipping the bzImage decompressor. panic=-1 with
# -no-reboot turns a guest panic into a prompt qemu exit without the result marker.
"$qemu" -accel tcg -machine pc -cpu max -smp "$cpus" -m "$mem" \
  -nodefaults -no-user-config -display none -nic none -no-reboot \
  -kernel "$cache/vmlinux" -initrd "$work/initramfs.cpio" \
  -append "console=ttyS0 rdinit=/init quiet loglevel=3 panic=-1 oops=panic nokaslr mitigations=off tsc=reliable no_timer_check i8042.noaux i8042.nokbd" \
  -serial "file:$work/console.fifo" -serial "file:$work/stdout" -serial "file:$work/stderr" \
  </dev/null 2>"$work/qemu.err" &
qemu_pid=$!

qemu_rc=0
timed_out=0
waited=0
while kill -0 "$qemu_pid" 2>/dev/null; do
  if ((waited >= timeout_s * 10)); then
    timed_out=1
    kill "$qemu_pid" 2>/dev/null || true
    break
  fi
  sleep 0.1
  waited=$((waited + 1))
done
wait "$qemu_pid" || qemu_rc=$?
qemu_pid=""
wait "$cat_out" "$cat_err" "$cat_console" || true

console_tail() {
  echo "run_in_vm: last console lines:" >&2
  tail -n 30 "$work/console" | tr -d '\r' | sed 's/^/  vm| /' >&2
}
if ((timed_out)); then
  console_tail
  vm_fail "the VM did not finish within ${timeout_s}s (--timeout)"
fi
result=$(tr -d '\r' < "$work/console" | awk '/^SLUICE_VM_RESULT [0-9]+$/ { print $2 }' | tail -n1)
if [ -z "$result" ]; then
  if [ -s "$work/qemu.err" ]; then sed 's/^/run_in_vm: qemu: /' "$work/qemu.err" >&2; fi
  console_tail
  if grep -q 'Initramfs unpacking failed' "$work/console"; then
    vm_fail "the ${initramfs_mib} MiB initramfs did not fit in ${mem} MiB of guest memory (--mem)"
  fi
  setup=$(tr -d '\r' < "$work/console" | grep -m1 '^SLUICE_VM_SETUP_FAILED' || true)
  [ -n "$setup" ] && vm_fail "guest set-up failed: ${setup#SLUICE_VM_SETUP_FAILED: }"
  vm_fail "the VM stopped without a result (qemu exit $qemu_rc; a guest panic or crash)"
fi
exit "$result"
