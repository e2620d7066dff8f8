#!/usr/bin/env bash
# Unpacks Debian's own kernel package (apt-get download, dpkg -x; nothing installed here) into the
# Soft-RoCE test VM's cache: an uncompressed vmlinux, the RDMA modules in load order, busybox.
#   tests/vm/prepare_vm.sh [CACHE_DIR]   (default: build/vm-cache, or $SLUICE_VM_CACHE; again: no-op)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${1:-${SLUICE_VM_CACHE:-$here/../../build/vm-cache}}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

# Load order matters: busybox insmod does not resolve dependencies. crc32_generic is needed by
# rdma_rxe (its ICRC) but not listed in its depends; udp_tunnel/ip6_udp_tunnel carry RoCEv2;
# sch_netem gives the link fault tests loss and delay.
modules=(configfs crc32_generic ib_core ib_uverbs iw_cm ib_cm rdma_cm rdma_ucm
         udp_tunnel ip6_udp_tunnel rdma_rxe dummy sch_netem)

die() { echo "prepare_vm: $*" >&2; exit 1; }

# Two test runs may prepare the same cache at once: the second waits, then finds it ready.
exec 9>"$cache/.lock"
flock 9
# Ready means prepared with this module list: a cache from before a module was added is redone.
if [ -f "$cache/ready" ] && [ "$(cat "$cache/modules/order" 2>/dev/null)" = "$(printf '%s\n' "${modules[@]}")" ]; then
  exit 0
fi

command -v busybox >/dev/null || die "busybox not found (apt-get install busybox-static)"
busybox_path=$(command -v busybox)
if ldd "$busybox_path" >/dev/null 2>&1; then
  die "$busybox_path is dynamically linked; the initramfs needs busybox-static"
fi

# The versioned image package a meta package depends on (linux-image-6.1.0-56-amd64 on
# Debian 12; on Ubuntu linux-image-generic, whose modules come in linux-modules*-VERSION).
image_package_of() {
  apt-cache depends "$1" 2>/dev/null |
    awk '/Depends: linux-image-(unsigned-)?[0-9]/ && !found { print $2; found = 1 }'
}
# SLUICE_VM_KERNEL_PACKAGE picks the package; default: what linux-image-amd64 depends on.
package=${SLUICE_VM_KERNEL_PACKAGE:-}
[ -n "$package" ] || package=$(image_package_of linux-image-amd64)
[ -n "$package" ] || package=$(image_package_of linux-image-generic)
[ -n "$package" ] || die "apt-cache knows neither linux-image-amd64 nor linux-image-generic (a Debian or Ubuntu archive in sources.list is needed, or set SLUICE_VM_KERNEL_PACKAGE)"
packages=("$package")
version=${package#linux-image-}
version=${version#unsigned-}
for extra in "linux-modules-$version" "linux-modules-extra-$version"; do
  if apt-cache show "$extra" >/dev/null 2>&1; then packages+=("$extra"); fi
done

work=$(mktemp -d "$cache/prepare.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "prepare_vm: downloading ${packages[*]} into $cache" >&2
# apt-get download writes into the current directory; _apt may not be able to write there,
# which apt reports as a warning and then downloads as root.
(cd "$work" && apt-get download -q "${packages[@]}" 2>&1 |
                { grep -v '^W: Download is performed unsandboxed' >&2 || true; }) ||
  die "apt-get download ${packages[*]} failed"
for deb in "$work"/*.deb; do
  [ -f "$deb" ] || die "apt-get download ${packages[*]} produced no .deb"
  dpkg -x "$deb" "$work/x"
done

vmlinuz=$(compgen -G "$work/x/boot/vmlinuz-*" || true)
vmlinuz=${vmlinuz%%$'\n'*}
[ -n "$vmlinuz" ] || die "$package has no /boot/vmlinuz-*"
version=${vmlinuz##*/vmlinuz-}

# qemu boots an ELF vmlinux through its PVH entry point, which skips the bzImage's own
# decompressor (slow under TCG). The payload is the first compressed stream in the bzImage
# whose decompression is an ELF file.
extract_vmlinux() {
  local image=$1 out=$2 magic tool offset
  for pair in '\xfd7zXZ\x00:xz -dc' '\x1f\x8b\x08\x00:gzip -dc' '\x28\xb5\x2f\xfd:zstd -dcq' '\x02\x21\x4c\x18:lz4 -dc'; do
    magic=${pair%%:*}
    tool=${pair#*:}
    command -v "${tool%% *}" >/dev/null || continue
    for offset in $(LC_ALL=C grep -obUaP "$magic" "$image" | cut -d: -f1 | sed -n 1,5p); do
      tail -c +$(( offset + 1 )) "$image" | $tool > "$out" 2>/dev/null || true
      if [ "$(head -c 4 "$out" | od -An -tx1 | tr -d ' ')" = "7f454c46" ]; then
        return 0
      fi
    done
  done
  return 1
}
extract_vmlinux "$vmlinuz" "$work/vmlinux" || die "could not extract an ELF vmlinux from $vmlinuz"

mkdir -p "$work/modules"
order=()
for module in "${modules[@]}"; do
  file=$(find "$work/x/lib/modules/$version" -name "$module.ko*" -print -quit)
  [ -n "$file" ] || die "$package has no module $module"
  case $file in
    *.ko) cp "$file" "$work/modules/$module.ko" ;;
    *.ko.xz) xz -dc "$file" > "$work/modules/$module.ko" ;;
    *.ko.zst) zstd -dcq "$file" > "$work/modules/$module.ko" ;;
    *.ko.gz) gzip -dc "$file" > "$work/modules/$module.ko" ;;
    *) die "unknown module format: $file" ;;
  esac
  order+=("$module")
done

rm -rf "$cache/vmlinux" "$cache/modules"
mv "$work/vmlinux" "$cache/vmlinux"
mv "$work/modules" "$cache/modules"
printf '%s\n' "${order[@]}" > "$cache/modules/order"
cp "$busybox_path" "$cache/busybox"
echo "$package $version" > "$cache/kernel"
touch "$cache/ready"
echo "prepare_vm: kernel $version ready in $cache" >&2
