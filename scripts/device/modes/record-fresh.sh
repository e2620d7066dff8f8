# fio on a volume the machine has never written, then on the same volume again (warm): once on
# an image fallocated but never written (VOLUMES_TOUCH=0), once on a sparse one (truncate); the
# first writes fault their memory in. The record stage warns about the sparse kind at start.
# shellcheck shell=bash disable=SC1091
source "$pack/modes/record.sh"
fresh_bytes=${RECORD_FRESH_BYTES:-8G}
VOLUMES_TOUCH=0 record_make_volumes 1
fresh=$(record_fio "$fresh_bytes" "${record_mounts[0]}/fio-fresh.dat")
warm=$(record_fio "$fresh_bytes" "${record_mounts[0]}/fio-fresh.dat")
record_row fresh "fio $fresh_bytes on a new fallocated, unwritten ext4 volume over /dev/shm, MB/s" "$fresh" "warm $warm" \
  "$(awk -v a="$fresh" -v b="$warm" 'BEGIN { printf "%.2f", a / b }')"
rm -f "${record_mounts[0]}/fio-fresh.dat"
# A sparse image: truncate, mkfs, loop, mount, as a hand-made stand-in volume would be.
sparse=/dev/shm/sluice-record-sparse
mkdir -p "$sparse/mnt"
truncate -s 10G "$sparse/sparse.img" && mkfs.ext4 -q -F -m 0 "$sparse/sparse.img" && mount -o loop "$sparse/sparse.img" "$sparse/mnt"
echo "allocated before: $(du -h "$sparse/sparse.img" | cut -f1) of 10G" | tee -a "$out/record-fio.log"
fresh=$(record_fio "$fresh_bytes" "$sparse/mnt/fio.dat")
warm=$(record_fio "$fresh_bytes" "$sparse/mnt/fio.dat")
record_row fresh "fio $fresh_bytes on a new SPARSE ext4 loop image over /dev/shm, MB/s" "$fresh" "warm $warm" \
  "$(awk -v a="$fresh" -v b="$warm" 'BEGIN { printf "%.2f", a / b }')"
umount "$sparse/mnt"
losetup -j "$sparse/sparse.img" | cut -d: -f1 | xargs -r -n1 losetup -d
rm -rf "$sparse"
record_table
