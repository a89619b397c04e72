#!/bin/bash
# Builds the guest initramfs for one lab kernel.
#
# Usage: initramfs.sh KERNEL_ALIAS OUT.cpio [--workloads] [--two-node] [--add SRC:DST]...
#   KERNEL_ALIAS  7.3 or 6.1 (fetched by fetch.sh into the cache)
#   --workloads   also the workloads' libraries: UCX and Open MPI (see below)
#   --two-node    also what the two-node tier runs besides: dropbear and etcd (see below)
#   --add SRC:DST copy host file SRC to DST in the guest (e.g. the CNI binary:
#                 --add build/agent/rdmanet:/opt/cni/bin/rdmanet); the
#                 shared libraries of a dynamic ELF are copied along.
#
# The image is two or three concatenated newc archives (the kernel unpacks them
# in order, later files win):
#   base    busybox, iproute2, tcpdump, rdma-core tools, perftest's ib_write_bw + their libraries and
#           the decompressed RDMA modules. Cached per kernel in
#           $CACHE/initramfs/<alias>.cpio, rebuilt only when this script, the
#           kernel or a host package it copies from changes.
#   workloads (--workloads only) UCX and Open MPI from the host's Debian packages
#           (fetch.sh installs them) with their dlopen()ed modules and data, and
#           workloads/allreduce.c built as /opt/lab/allreduce. Cached in
#           $CACHE/initramfs/workloads-<key>.cpio, kernel-independent.
#   two-node (--two-node only) Debian 12's dropbear (server, dbclient, dropbearkey: a real
#           remote shell between the nodes' pods) and etcd + etcdctl (cluster IPAM's
#           store), with their libraries. Cached in $CACHE/initramfs/twonode-<key>.cpio.
#   overlay /init, /lab/lib.sh, /lab/scenarios/*.sh and the --add files:
#           always rebuilt (tiny, and the CNI binaries change on every build).
# Archives are left uncompressed: under software emulation, decompressing in
# the guest costs more than reading a few more MB through fw_cfg.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${RDMANET_LAB_CACHE:-/var/cache/rdmanet-lab}
die() { echo "initramfs.sh: FATAL: $*" >&2; exit 1; }
log() { echo "initramfs.sh: $*" >&2; }

[ $# -ge 2 ] || die "usage: initramfs.sh KERNEL_ALIAS OUT.cpio [--workloads] [--two-node] [--add SRC:DST]..."
ALIAS=$1 OUT=$2; shift 2
ADDS=() WORKLOADS=0 TWONODE=0
while [ $# -gt 0 ]; do
    case "$1" in
        --workloads) WORKLOADS=1; shift ;;
        --two-node) TWONODE=1; shift ;;
        --add) [ $# -ge 2 ] || die "--add needs SRC:DST"; ADDS+=("$2"); shift 2 ;;
        *) die "unknown argument '$1'" ;;
    esac
done

KDIR=$CACHE/kernels/$ALIAS
[ -f "$KDIR/.complete" ] || die "kernel $ALIAS not in $CACHE (run fetch.sh $ALIAS)"
KVER=$(cat "$KDIR/kver")

# Host programs the guest gets, at the same paths as on the host.
BINS="/usr/sbin/ip /usr/bin/rdma /usr/sbin/dcb /usr/sbin/tc /usr/bin/tcpdump
/usr/bin/ibv_devinfo /usr/bin/ibv_devices /usr/bin/ibv_rc_pingpong /usr/bin/rping
/usr/bin/ib_write_bw /usr/bin/strace /usr/sbin/mke2fs"
# dlopen()ed at run time, so ldd of the programs does not list them:
# the soft-RoCE provider, and libgcc_s (glibc loads it for pthread_cancel /
# unwinding; rping aborts without it).
DLOPENED="/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
/usr/lib/x86_64-linux-gnu/libgcc_s.so.1"
# Modules wanted, in load order; their dependencies come from modprobe
# --show-depends. crc32_generic: rxe on 6.1 fails without it ("failed to add
# v0"); it no longer exists from 6.15 on (crc32 is library code there).
MODULES="crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe configfs
ib_cm iw_cm rdma_cm rdma_ucm veth"
# In the image but not loaded by /init: the PCI tier's NIC drivers (igb with its
# VFs' igbvf, e1000e), the state disk's virtio_blk + ext4, and macvlan (the kernel asks
# modprobe for it when a macvlan link is made). Scenarios load them
# with modprobe (modules.dep below), so the other scenarios boot no slower.
ON_DEMAND="igb igbvf e1000e virtio_blk ext4 macvlan"

# copy_file SRC ROOT: SRC to the same path under ROOT, dereferenced. The
# merged-/usr symlinks in ROOT (lib -> usr/lib ...) make /lib/x/y land in usr/lib.
copy_file() {
    mkdir -p "$2$(dirname "$1")"
    cp -L "$1" "$2$1"
}
# copy_elf FILE ROOT: FILE plus every library ldd resolves for it.
copy_elf() {
    copy_file "$1" "$2"
    # "libx.so => /path (0x...)" and the loader's "/lib64/ld-linux... (0x...)".
    ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
        while read -r lib; do copy_file "$lib" "$2"; done
}
# usrpath PATH: /bin/x -> /usr/bin/x etc. The overlay archive must not carry a
# real bin/ or lib/ directory where the base has the merged-/usr symlink.
usrpath() {
    case "$1" in
        /bin/*|/sbin/*|/lib/*|/lib64/*) echo "/usr$1" ;;
        *) echo "$1" ;;
    esac
}
# module_path KO: where the kernel module file KO goes in the image (decompressed).
module_path() { rel=${1#"$KDIR"}; rel=${rel%.xz}; echo "${rel%.zst}"; }
# add_module KO ROOT: KO decompressed under ROOT (busybox insmod and the kernel's
# in-kernel decompression support vary by version).
add_module() {
    _ko_out=$2$(module_path "$1")
    mkdir -p "$(dirname "$_ko_out")"
    case "$1" in
        *.xz)  xz -dc "$1" > "$_ko_out" ;;
        *.zst) zstd -qdc "$1" > "$_ko_out" ;;
        *)     cp "$1" "$_ko_out" ;;
    esac
}
# ldd fails on static binaries and scripts: nothing to copy for those.
is_dynamic_elf() { ldd "$1" >/dev/null 2>&1; }
mkcpio() { # DIR OUT: deterministic newc archive, all files owned by root
    (cd "$1" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) > "$2"
}

# --- base (cached) ---------------------------------------------------------------
# The key covers everything the base is built from.
key=$( { cat "$0"; echo "$KVER"; cat "$KDIR/packages";
         dpkg-query -W busybox-static iproute2 tcpdump ibverbs-utils ibverbs-providers \
             rdmacm-utils perftest libc6 libgcc-s1 libpcap0.8 libnl-3-200 strace e2fsprogs 2>/dev/null; } | sha256sum | cut -c1-16)
BASE=$CACHE/initramfs/$ALIAS-$key.cpio
if [ ! -f "$BASE" ]; then
    t0=$(date +%s.%N)
    mkdir -p "$CACHE/initramfs"
    rm -f "$CACHE/initramfs/$ALIAS"-*.cpio        # stale keys
    root=$(mktemp -d "$CACHE/initramfs/build.XXXXXX")
    trap 'rm -rf "$root"' EXIT
    # merged-/usr, as on the host, so library paths from ldd work either way.
    mkdir -p "$root"/usr/bin "$root"/usr/sbin "$root"/usr/lib64 "$root"/usr/lib/x86_64-linux-gnu \
        "$root"/proc "$root"/sys "$root"/dev "$root"/run "$root"/tmp "$root"/etc "$root"/var "$root"/lab
    for d in bin sbin lib lib64; do ln -s "usr/$d" "$root/$d"; done
    ln -s ../run "$root/var/run"

    # busybox: one static binary, a link per applet. Applets are linked only
    # where no real program is copied later (ip, tc: use /usr/sbin/ip, busybox
    # ash prefers its own applet over PATH anyway).
    cp /bin/busybox "$root/usr/bin/busybox"
    for a in $(/bin/busybox --list-full); do
        [ -e "$root/$a" ] || ln -s /usr/bin/busybox "$root/$a"
    done
    # The kernel runs /sbin/modprobe for on-demand module loads.
    ln -sf /usr/bin/busybox "$root/usr/sbin/modprobe"

    for b in $BINS; do
        [ -x "$b" ] || die "$b missing on the host (fetch.sh installs it)"
        rm -f "$root$b"   # a busybox link of the same name
        copy_elf "$b" "$root"
    done
    for l in $DLOPENED; do copy_elf "$l" "$root"; done
    mkdir -p "$root/etc/libibverbs.d"
    cp /etc/libibverbs.d/rxe.driver "$root/etc/libibverbs.d/"
    # tcpdump, ip netns and glibc want these to exist.
    echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
    echo 'root:x:0:' > "$root/etc/group"
    printf '127.0.0.1 localhost\n' > "$root/etc/hosts"

    # Modules, plus a load-order list for /init.
    : > "$root/lab/modules.order"
    for m in $MODULES; do
        if ! deps=$(modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" 2>/dev/null); then
            log "$ALIAS: module $m not found in $KVER (built in or gone): skipped"
            continue
        fi
        echo "$deps" | awk '$1 == "insmod" { print $2 }' | while read -r ko; do
            dst=$(module_path "$ko")
            grep -qx "$dst" "$root/lab/modules.order" && continue
            add_module "$ko" "$root"
            echo "$dst" >> "$root/lab/modules.order"
        done
    done
    for m in $ON_DEMAND; do
        deps=$(modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" 2>/dev/null) ||
            die "module $m not found in $KVER"
        echo "$deps" | awk '$1 == "insmod" { print $2 }' | while read -r ko; do
            [ -f "$root$(module_path "$ko")" ] || add_module "$ko" "$root"
        done
    done
    # modules.dep for busybox modprobe (on-demand loads by the kernel).
    depmod -b "$root" "$KVER" 2>/dev/null
    echo "$KVER" > "$root/lab/kver"

    mkcpio "$root" "$BASE.tmp"
    mv "$BASE.tmp" "$BASE"
    rm -rf "$root"; trap - EXIT
    log "$ALIAS: base $(du -h "$BASE" | cut -f1) built in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s"
fi

# --- workloads (cached, --workloads only) ----------------------------------------------
# What the workloads run: UCX (ucx_info, ucx_perftest) and Open MPI (mpirun, orted) as
# Debian 12 packages them, with the modules they dlopen() and the data they read, and a small
# MPI program. Open MPI's mpi.h comes from libopenmpi-dev, downloaded and unpacked here, never
# installed (it would pull in gfortran).
WL_PKGS="libucx0 ucx-utils openmpi-bin libopenmpi3 openmpi-common libpmix2 libhwloc15"
WL_BINS="/usr/bin/ucx_info /usr/bin/ucx_perftest /usr/bin/orterun /usr/bin/orted"
ML=/usr/lib/x86_64-linux-gnu
# dlopen()ed: UCX's transports, Open MPI's and PMIx's components.
WL_MODULE_DIRS="$ML/ucx $ML/openmpi/lib/openmpi3 $ML/pmix2/lib/pmix"
# Read at run time: help texts (a missing one turns an error into "help file not found")
# and the site configuration (which turns pml ucx off: the command line turns it on).
WL_DATA="/usr/share/openmpi /usr/lib/x86_64-linux-gnu/pmix2/share /etc/openmpi"
build_workloads() { # OUT
    _wl=$(mktemp -d "$CACHE/initramfs/workloads.XXXXXX")
    # merged-/usr, as in the base (whose lib -> usr/lib links these entries repeat).
    mkdir -p "$_wl/usr/bin" "$_wl/usr/sbin" "$_wl/usr/lib64" "$_wl$ML"
    for d in bin sbin lib lib64; do ln -s "usr/$d" "$_wl/$d"; done
    for b in $WL_BINS; do
        [ -x "$b" ] || die "$b missing on the host (fetch.sh installs $WL_PKGS)"
        copy_elf "$b" "$_wl"
    done
    for d in $WL_MODULE_DIRS; do
        for so in "$d"/*.so "$d"/*.so.0; do
            [ -e "$so" ] && copy_elf "$so" "$_wl"
        done
    done
    for d in $WL_DATA; do mkdir -p "$_wl$d"; cp -rL "$d/." "$_wl$d/"; done
    mkdir -p "$_wl/usr/bin" "$_wl/opt/lab"
    ln -sf orterun "$_wl/usr/bin/mpirun"
    # mpi.h: libopenmpi-dev of the installed Open MPI's version, unpacked.
    _ver=$(dpkg-query -W -f '${Version}' libopenmpi3)
    ( cd "$_wl" && apt-get download -q "libopenmpi-dev=$_ver" >&2 ) ||
        die "apt-get download libopenmpi-dev=$_ver failed"
    dpkg -x "$_wl"/libopenmpi-dev_*.deb "$_wl/dev"
    _inc=$_wl/dev$ML/openmpi/include
    [ -f "$_inc/mpi.h" ] || die "no mpi.h in libopenmpi-dev $_ver"
    cc -O2 -Wall -Werror -I"$_inc" -o "$_wl/opt/lab/allreduce" "$HERE/workloads/allreduce.c" \
        "$ML/libmpi.so.40" || die "cannot build workloads/allreduce.c"
    ldd "$_wl/opt/lab/allreduce" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' |
        while read -r lib; do copy_file "$lib" "$_wl"; done
    rm -rf "$_wl/dev" "$_wl"/*.deb
    mkcpio "$_wl" "$1.tmp"
    mv "$1.tmp" "$1"
    rm -rf "$_wl"
}
WLCPIO=""
if [ "$WORKLOADS" -eq 1 ]; then
    wl_key=$( { cat "$0" "$HERE/workloads/allreduce.c"; dpkg-query -W $WL_PKGS 2>/dev/null; } |
        sha256sum | cut -c1-16)
    WLCPIO=$CACHE/initramfs/workloads-$wl_key.cpio
    if [ ! -f "$WLCPIO" ]; then
        t0=$(date +%s.%N)
        rm -f "$CACHE/initramfs"/workloads-*.cpio
        build_workloads "$WLCPIO"
        log "workloads $(du -h "$WLCPIO" | cut -f1) built in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s"
    fi
fi

# --- two-node (cached, --two-node only) ---------------------------------------------------
# Programs the two-node tier runs besides the workloads: a real ssh server and client
# (dropbear's, Open MPI's remote shell between the nodes' pods) and etcd (the cluster IPAM's
# store on node a, its client for the checks). Statically linked Go (etcd) and small C
# programs (dropbear): ldd finds what they need.
TN_PKGS="dropbear-bin etcd-server etcd-client"
TN_BINS="/usr/sbin/dropbear /usr/bin/dbclient /usr/bin/dropbearkey /usr/bin/etcd /usr/bin/etcdctl"
TNCPIO=""
if [ "$TWONODE" -eq 1 ]; then
    tn_key=$( { cat "$0"; dpkg-query -W $TN_PKGS 2>/dev/null; } | sha256sum | cut -c1-16)
    TNCPIO=$CACHE/initramfs/twonode-$tn_key.cpio
    if [ ! -f "$TNCPIO" ]; then
        mkdir -p "$CACHE/initramfs"
        rm -f "$CACHE/initramfs"/twonode-*.cpio
        _tn=$(mktemp -d "$CACHE/initramfs/twonode.XXXXXX")
        mkdir -p "$_tn/usr/bin" "$_tn/usr/sbin" "$_tn/usr/lib64" "$_tn$ML"
        for d in bin sbin lib lib64; do ln -s "usr/$d" "$_tn/$d"; done
        for b in $TN_BINS; do
            [ -x "$b" ] || die "$b missing on the host (fetch.sh installs $TN_PKGS)"
            copy_elf "$b" "$_tn"
        done
        # dropbear lets a user in only with a shell listed here.
        mkdir -p "$_tn/etc"; printf '/bin/sh\n' > "$_tn/etc/shells"
        mkcpio "$_tn" "$TNCPIO.tmp"
        mv "$TNCPIO.tmp" "$TNCPIO"
        rm -rf "$_tn"
        log "two-node $(du -h "$TNCPIO" | cut -f1) built"
    fi
fi

# --- overlay (every run) -------------------------------------------------------------
ov=$(mktemp -d)
trap 'rm -rf "$ov" "$ov.cpio"' EXIT
mkdir -p "$ov/lab/scenarios"
install -m 0755 "$HERE/guest/init" "$ov/init"
install -m 0644 "$HERE/guest/lib.sh" "$ov/lab/lib.sh"
install -m 0755 "$HERE"/scenarios/*.sh "$ov/lab/scenarios/"
for a in "${ADDS[@]+"${ADDS[@]}"}"; do
    src=${a%%:*} dst=${a#*:}
    [ "$src" != "$a" ] && [ -n "$dst" ] || die "--add wants SRC:DST, got '$a'"
    dst=$(usrpath "$dst")
    [ -f "$src" ] || die "--add: $src does not exist"
    mkdir -p "$ov$(dirname "$dst")"
    cp -L "$src" "$ov$dst"
    # Libraries of added programs (the node binaries need only glibc, which the
    # base has; anything else is copied here).
    if is_dynamic_elf "$src"; then
        ldd "$src" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | while read -r lib; do
            d=$(usrpath "$lib"); mkdir -p "$ov$(dirname "$d")"; cp -L "$lib" "$ov$d"
        done
    fi
done
mkcpio "$ov" "$ov.cpio"
cat "$BASE" ${WLCPIO:+"$WLCPIO"} ${TNCPIO:+"$TNCPIO"} "$ov.cpio" > "$OUT"
rm -f "$ov.cpio"
