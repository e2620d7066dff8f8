#!/usr/bin/env bash
# ext4 or xfs volumes on loop devices over images in DIR (default /dev/shm/sluice-volumes: NVMe stand-ins in RAM):
#   scripts/volumes.sh make N SIZE [ext4|xfs] [DIR]   prints the N mount points, one a line (VOLUMES_TOUCH=0: unwritten)
#   scripts/volumes.sh remove [DIR]                   unmounts, detaches and deletes all it made in DIR
set -euo pipefail

default_dir=/dev/shm/sluice-volumes

usage() {
  sed -n '3,4p' "$0" | sed 's/^# *//' >&2
  exit 2
}

fail() {
  echo "volumes.sh: $*" >&2
  exit 1
}

# SIZE as people write it (512M, 4G, 4GiB, 1T; a plain number is bytes) -> bytes.
parse_size() {
  local text=$1 number unit
  [[ $text =~ ^([0-9]+)([KMGT]?)(i?B)?$ ]] || fail "size '$text' is not a size (examples: 512M, 4GiB, 1T)"
  number=${BASH_REMATCH[1]}
  unit=${BASH_REMATCH[2]}
  case $unit in
    K) echo $((number << 10)) ;;
    M) echo $((number << 20)) ;;
    G) echo $((number << 30)) ;;
    T) echo $((number << 40)) ;;
    *) echo "$number" ;;
  esac
}

# Mount points under DIR/mnt, deepest first, from the kernel's own table.
mounts_under() {
  local mnt=$1
  awk -v prefix="$mnt/" '{ gsub(/\\040/, " ", $2) } index($2, prefix) == 1 { print $2 }' /proc/self/mounts | sort -r
}

# Loop devices whose backing file is in DIR/images (losetup -l lists every device and its file).
loops_over() {
  local images=$1
  losetup --list --noheadings --output NAME,BACK-FILE 2>/dev/null |
    awk -v prefix="$images/" 'index($2, prefix) == 1 { print $1 }'
}

# What to undo is read from the system (mounts under DIR/mnt, loop devices over DIR/images), not from
# a note, so it also cleans up after a crash or a half-finished make; nothing left is a no-op.
remove() {
  local dir=$1 status=0 mount_point loop
  [ -d "$dir" ] || return 0
  dir=$(cd "$dir" && pwd -P)
  while IFS= read -r mount_point; do
    [ -n "$mount_point" ] || continue
    if ! umount "$mount_point"; then
      echo "volumes.sh: umount $mount_point failed (a process still uses it? see: fuser -vm $mount_point)" >&2
      status=1
    fi
  done < <(mounts_under "$dir/mnt")
  while IFS= read -r loop; do
    [ -n "$loop" ] || continue
    if ! losetup --detach "$loop"; then
      echo "volumes.sh: losetup --detach $loop failed" >&2
      status=1
    fi
  done < <(loops_over "$dir/images")
  if [ "$status" -ne 0 ]; then
    echo "volumes.sh: left $dir in place; run remove again once the above is fixed" >&2
    return 1
  fi
  # Only what make creates: a stray file of someone else's in DIR stops the removal of DIR.
  rm -f "$dir"/images/vol*.img
  rmdir "$dir"/mnt/vol* 2>/dev/null || true
  rmdir "$dir/images" "$dir/mnt" 2>/dev/null || true
  rmdir "$dir" 2>/dev/null || echo "volumes.sh: $dir holds files volumes.sh did not make; left in place" >&2
}

# Attaches IMAGE to a free loop device (find and attach in one call, so two runs at once do not
# take the same one) and prints it; creates the next /dev/loopN node where the container has too few.
attach() {
  local image=$1 device number
  if device=$(losetup --find --show "$image" 2>/dev/null); then
    echo "$device"
    return
  fi
  [ -e /dev/loop-control ] || fail "losetup --find $image failed and there is no /dev/loop-control (no loop driver?)"
  number=0
  while [ -e "/dev/loop$number" ]; do number=$((number + 1)); done
  mknod "/dev/loop$number" b 7 "$number" || fail "no free loop device, and mknod /dev/loop$number failed"
  losetup --find --show "$image" || fail "losetup --find --show $image failed: no free loop device"
}

make_one() {  # make_one DIR INDEX BYTES FS: prints the mount point
  local dir=$1 index=$2 bytes=$3 filesystem=$4 image loop mount_point
  image="$dir/images/vol$index.img"
  mount_point="$dir/mnt/vol$index"
  # Fully allocated (mkfs does not discard, which would punch the holes back), so a lack of memory
  # or space fails here and not in the middle of a run.
  truncate --size "$bytes" "$image" || fail "truncate $image failed"
  fallocate --length "$bytes" "$image" ||
    fail "fallocate $image ($bytes bytes) failed: too little memory or space in $(dirname "$image")"
  # And written once (VOLUMES_TOUCH=0 skips it): fallocate leaves tmpfs pages unwritten, and a
  # virtual machine may back its memory only on first write, at a fraction of a drive's rate.
  if [ "${VOLUMES_TOUCH:-1}" = 1 ]; then
    dd if=/dev/zero of="$image" bs=64M count="$bytes" iflag=count_bytes conv=notrunc status=none ||
      fail "writing $image failed"
  fi
  loop=$(attach "$image")
  case $filesystem in
    # Inode tables and journal written now, so no background init thread runs during a measurement.
    ext4) mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0,nodiscard "$loop" >/dev/null ||
            fail "mkfs.ext4 $loop failed" ;;
    xfs) mkfs.xfs -q -f -K "$loop" >/dev/null || fail "mkfs.xfs $loop failed" ;;
  esac
  mkdir -p "$mount_point"
  mount -o noatime "$loop" "$mount_point" || fail "mount $loop $mount_point failed"
  echo "$mount_point"
}

make_volumes() {
  local count=$1 size=$2 filesystem=$3 dir=$4 bytes need available index
  [[ $count =~ ^[1-9][0-9]*$ ]] || fail "N must be a positive whole number, not '$count'"
  bytes=$(parse_size "$size")
  [ "$bytes" -ge $((64 << 20)) ] || fail "SIZE $size is below 64M, too small for a file system a benchmark can use"
  case $filesystem in
    ext4 | xfs) ;;
    *) fail "file system '$filesystem' is not one of ext4, xfs" ;;
  esac
  local package=e2fsprogs
  [ "$filesystem" = xfs ] && package=xfsprogs
  command -v "mkfs.$filesystem" >/dev/null || fail "mkfs.$filesystem not found (apt-get install $package)"
  command -v losetup >/dev/null || fail "losetup not found (apt-get install mount)"
  [ "$(id -u)" -eq 0 ] || fail "loop devices and mounts need root"
  if [ -d "$dir/images" ] && [ -n "$(ls -A "$dir/images" 2>/dev/null)" ]; then
    fail "$dir already holds volumes: run '$0 remove $dir' first"
  fi
  if [ "$filesystem" = xfs ] && [ "$bytes" -lt $((300 << 20)) ]; then fail "xfs needs at least 300M a volume, not $size"; fi
  mkdir -p "$dir/images" "$dir/mnt" || fail "cannot create $dir"
  dir=$(cd "$dir" && pwd -P)
  # Whatever happens from here on, nothing is left behind.
  trap 'status=$?; if [ "$status" -ne 0 ]; then remove "$dir" || true; fi' EXIT
  need=$((count * bytes))
  available=$(df --output=avail -B1 "$dir/images" | tail -n 1)
  [ "$available" -ge "$need" ] ||
    fail "$count × $size needs $need bytes; $dir has $available free"
  for ((index = 0; index < count; ++index)); do
    make_one "$dir" "$index" "$bytes" "$filesystem"
  done
}

[ $# -ge 1 ] || usage
case $1 in
  make)
    if [ $# -lt 3 ] || [ $# -gt 5 ]; then usage; fi
    make_volumes "$2" "$3" "${4:-ext4}" "${5:-$default_dir}"
    ;;
  remove)
    [ $# -le 2 ] || usage
    [ "$(id -u)" -eq 0 ] || fail "loop devices and mounts need root"
    remove "${2:-$default_dir}"
    ;;
  *) usage ;;
esac
