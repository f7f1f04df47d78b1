#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Build the Soft-RoCE guest of the interop tests: Debian's own kernel
# (linux-image-amd64, fetched with apt-get download) and an initramfs that
# is the whole root file system: busybox, the kernel modules rdma_rxe needs,
# and this host's own rdma-core, ibverbs-utils, perftest, rdmacm-utils (with
# the rsocket programs rstream and riostream), qperf and UCX's ucx_perftest
# (with UCX's transport modules) binaries with the libraries ldd finds for
# them (the guest runs the same Debian 12 user space as the host).
#
#   rxe_image.sh CACHE_DIR     prints the directory holding vmlinuz, initrd.gz
#                              and kernel-package
#
# The kernel .deb and the images are kept in CACHE_DIR: an image is named by
# a hash of everything it is made of (kernel package, these scripts, the
# versions of the host packages copied in), so a second run reuses it and
# any change rebuilds it. Needs root only to download (apt-get).
set -euo pipefail
# The host's own libraries, not rocemu's (meson runs tests with the build's
# library directories in LD_LIBRARY_PATH).
unset LD_LIBRARY_PATH LD_PRELOAD
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:?usage: rxe_image.sh CACHE_DIR}
mkdir -p "$cache"
exec 9>"$cache/lock"
flock 9 # one builder at a time; the others then find its image

# scratch space in the cache (same file system: renames are atomic), removed
# however the script ends
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 143' TERM INT HUP

log() { echo "rxe_image: $*" >&2; }
die() {
	log "$*"
	exit 1
}

# The user space copied into the guest, by package (their versions key the image).
pkgs=(libc6 libibverbs1 ibverbs-providers librdmacm1 ibverbs-utils perftest rdmacm-utils qperf
	libucx0 ucx-utils iproute2 kmod dash busybox-static)
bins=(/usr/bin/dash /usr/bin/ip /usr/bin/rdma /usr/bin/kmod
	/usr/bin/ibv_devinfo /usr/bin/ibv_rc_pingpong /usr/bin/ibv_uc_pingpong
	/usr/bin/ibv_ud_pingpong /usr/bin/ibv_srq_pingpong
	/usr/bin/ib_send_lat /usr/bin/ib_send_bw /usr/bin/ib_write_lat /usr/bin/ib_write_bw
	/usr/bin/ib_read_lat /usr/bin/ib_read_bw /usr/bin/ib_atomic_lat /usr/bin/ib_atomic_bw
	/usr/bin/rping /usr/bin/ucmatose /usr/bin/udaddy /usr/bin/rstream /usr/bin/riostream
	/usr/bin/qperf /usr/bin/ucx_perftest)
# UCX finds its transports by scanning its module directory (dlopen: ldd
# does not see them); the InfiniBand one serves rxe
ucx_mods=(/usr/lib/x86_64-linux-gnu/ucx/libuct_ib.so.0 /usr/lib/x86_64-linux-gnu/ucx/libuct_rdmacm.so.0)
# What rdma_rxe needs beyond its own dependencies: rxe asks the crypto API
# for "crc32" (its ICRC), which no module depends on by symbol. 8021q: the
# VLAN netdevs of the VLAN round (interop_rxe.sh).
mods=(virtio_pci virtio_net 9pnet_virtio 9p crc32_generic crc32_pclmul
	rdma_rxe ib_uverbs rdma_ucm ib_umad 8021q)

# ---------------------------------------------------------------- kernel package
# linux-image-amd64 is a metapackage: its dependency is the kernel of the day.
kernel_pkg() {
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}
kpkg=${ROCEMU_INTEROP_KERNEL:-$(kernel_pkg)}
if [ -z "$kpkg" ]; then
	[ "$(id -u)" = 0 ] || die "apt knows no linux-image-amd64; run apt-get update as root"
	log "apt-get update (no linux-image-amd64 in the package lists)"
	apt-get update -q >&2
	kpkg=$(kernel_pkg)
	[ -n "$kpkg" ] || die "no linux-image-amd64 in Debian's package lists"
fi
kver=${kpkg#linux-image-}
deb=$(ls "$cache/$kpkg"_*.deb 2>/dev/null | head -n 1 || true)
if [ -z "$deb" ]; then
	log "downloading $kpkg"
	mkdir "$work/dl"
	# apt-get download checks the package's hash against the signed archive
	(cd "$work/dl" && apt-get download -q -o APT::Sandbox::User=root "$kpkg" >&2) ||
		die "apt-get download $kpkg failed"
	rm -f "$cache"/linux-image-*.deb # the kernel of yesterday
	mv "$work"/dl/*.deb "$cache/"
	deb=$(ls "$cache/$kpkg"_*.deb | head -n 1)
fi

# ---------------------------------------------------------------- cached image?
for b in "${bins[@]}"; do [ -x "$b" ] || die "$b missing (install: ${pkgs[*]})"; done
[ -x /bin/busybox ] || die "/bin/busybox missing (install busybox-static)"
key=$({
	basename "$deb"
	printf '%s\n' "${mods[@]}"
	cat "$0" "$here"/guest/*
	dpkg-query -W "${pkgs[@]}" 2>/dev/null
} | sha256sum | cut -c1-16)
img=$cache/img-$key
if [ -s "$img/initrd.gz" ]; then
	echo "$img"
	exit 0
fi
log "building image $img (kernel $(basename "$deb"))"
root=$work/root
# merged /usr, as on the host: /bin, /sbin, /lib and /lib64 link into /usr
mkdir -p "$root"/{usr/bin,usr/sbin,usr/lib,usr/lib64,etc,proc,sys,dev,tmp,root,host}
for d in bin sbin lib lib64; do ln -s usr/$d "$root/$d"; done

# ---------------------------------------------------------------- kernel and modules
# vmlinuz and the modules the guest loads, kept per kernel package: a change
# of the guest's scripts rebuilds only the initramfs.
kdir=$cache/kernel-$(printf '%s\n' "$(basename "$deb")" "${mods[@]}" | sha256sum | cut -c1-16)
if [ ! -s "$kdir/vmlinuz" ]; then
	log "unpacking $(basename "$deb")"
	kx=$work/kx
	rm -rf "$kdir.tmp"
	mkdir -p "$kx" "$kdir.tmp"
	# (without the big trees no RDMA module needs: half the writing)
	skip=()
	for t in drivers/gpu drivers/media drivers/net/ethernet drivers/net/wireless drivers/infiniband/hw \
		drivers/staging drivers/usb drivers/scsi drivers/comedi sound; do
		skip+=(--exclude "./lib/modules/$kver/kernel/$t")
	done
	dpkg-deb --fsys-tarfile "$deb" |
		tar -x -C "$kx" --wildcards "${skip[@]}" "./boot/vmlinuz-$kver" "./lib/modules/$kver/*"
	kmods=$kx/lib/modules/$kver
	# module name -> file; names use '_' where file names may use '-'
	find "$kmods/kernel" -name '*.ko*' |
		awk -F/ '{ n = $NF; sub(/\.ko.*$/, "", n); gsub(/-/, "_", n); print n, $0 }' >"$work/modmap"
	need=("${mods[@]}")
	declare -A have=()
	while [ ${#need[@]} -gt 0 ]; do
		m=${need[0]//-/_}
		need=("${need[@]:1}")
		[ -n "${have[$m]:-}" ] && continue
		have[$m]=1
		sed 's/-/_/g' "$kmods/modules.builtin" | grep -qx "kernel/.*/$m\.ko.*" && continue
		f=$(awk -v m="$m" '$1 == m { print $2; exit }' "$work/modmap")
		[ -n "$f" ] || die "kernel module $m not in $kpkg"
		rel=${f#"$kx"}
		mkdir -p "$kdir.tmp$(dirname "$rel")"
		cp "$f" "$kdir.tmp$rel"
		for d in $(/sbin/modinfo -F depends "$f" | tr ',' ' '); do need+=("$d"); done
	done
	cp "$kmods"/modules.{order,builtin,builtin.modinfo} "$kdir.tmp/lib/modules/$kver/"
	/sbin/depmod -b "$kdir.tmp" "$kver"
	cp "$kx/boot/vmlinuz-$kver" "$kdir.tmp/vmlinuz"
	rm -rf "$kx" "$kdir"
	mv "$kdir.tmp" "$kdir"
fi
cp -a "$kdir/lib/modules" "$root/lib/"

# ---------------------------------------------------------------- user space
# copy_elf FILE: FILE and every library ldd resolves for it, at the same paths
copy_elf() {
	local f
	for f in "$1" $(ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
		case $f in
		/lib/* | /lib64/* | /usr/lib/* | /usr/lib64/* | /usr/bin/* | /usr/sbin/*) ;;
		*) die "$1 needs $f, which is not the system's" ;;
		esac
		[ -e "$root$f" ] && continue
		mkdir -p "$root$(dirname "$f")"
		cp -L "$f" "$root$f"
	done
}
for b in "${bins[@]}" "${ucx_mods[@]}"; do copy_elf "$b"; done
copy_elf "$(ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so | head -n 1)"
mkdir -p "$root/etc/libibverbs.d"
cp /etc/libibverbs.d/rxe.driver "$root/etc/libibverbs.d/"
# dlopen()ed by glibc: name lookups, and libgcc_s for pthread_cancel (rping)
for f in libnss_files.so.2 libnss_dns.so.2 libgcc_s.so.1; do
	cp -L "/lib/x86_64-linux-gnu/$f" "$root/lib/x86_64-linux-gnu/"
done
for k in modprobe insmod lsmod modinfo depmod; do ln -s ../bin/kmod "$root/usr/sbin/$k"; done
ln -s dash "$root/usr/bin/sh"
# Debian's busybox-static runs its own applets before $PATH: /bin/sh is dash,
# and every applet that has a real binary above is left out.
cp /bin/busybox "$root/usr/bin/busybox"
for a in $(/bin/busybox --list); do
	[ -e "$root/usr/bin/$a" ] || [ -e "$root/usr/sbin/$a" ] || ln -s busybox "$root/usr/bin/$a"
done
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files\n' >"$root/etc/nsswitch.conf"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"
cp /etc/services /etc/protocols "$root/etc/"
install -m 0755 "$here/guest/init" "$root/init"
for f in rxe-agent rxe-serve; do install -m 0755 "$here/guest/$f" "$root/usr/bin/$f"; done

rm -rf "$img.tmp"
mkdir -p "$img.tmp"
cp "$kdir/vmlinuz" "$img.tmp/vmlinuz"
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 >"$img.tmp/initrd.gz"
basename "$deb" >"$img.tmp/kernel-package"
mv "$img.tmp" "$img"
# keep the three newest images (other worktrees may use theirs), one kernel
ls -dt "$cache"/img-* | tail -n +4 | xargs -r rm -rf
ls -d "$cache"/kernel-* | { grep -vx "$kdir" || true; } | xargs -r rm -rf
log "image ready: $(du -sh "$img" | cut -f1) ($(du -sh "$root" | cut -f1) unpacked)"
echo "$img"
