#!/bin/bash
# Fetches everything the kernel lab needs and caches it between runs:
#   - host packages (qemu, busybox-static, kmod, RDMA userspace, UCX and Open MPI
#     for the workloads' scenario, dropbear, etcd and python3 for the two-node tier ...),
#     installed with the host's own apt only when missing (packaged services, etcd's,
#     kept from starting);
#   - the guest kernels, downloaded with a *private* APT configuration (own
#     sources, state and cache under the lab cache) so the host's APT setup is
#     never touched, and extracted to $CACHE/kernels/<alias>/{vmlinuz,lib/modules/<kver>}
#     (the lib/modules layout lets depmod/modprobe -d use the tree as is).
#
#   - QEMU >= 8.0 for the PCI tier (the igb model with SR-IOV; Debian 12 ships
#     7.2): Debian 13's qemu-system-x86 and its whole dependency closure,
#     downloaded with a private APT configuration of its own, unpacked with
#     dpkg -x into $CACHE/qemu/tree and started through that tree's own dynamic
#     loader by $CACHE/qemu/qemu-system-x86_64 (nothing installed on the host).
#
# Usage: fetch.sh [ALIAS...]      ALIAS: 7.3 (trixie-backports), 6.1 (bookworm),
#                                 qemu (QEMU 10 from trixie), cri-api (the CRI
#                                 api.proto from trixie); default: all of them
# Env:   RDMANET_LAB_CACHE        cache root (default /var/cache/rdmanet-lab)
#        RDMANET_LAB_KVER73       7.3 package version suffix (default 7.3.4+deb13-amd64)
#
# Prints nothing but progress on stderr; fails loudly (non-zero) when the
# mirror cannot be reached: a lab test without its kernel is a failure, not a skip.
set -eu

CACHE=${RDMANET_LAB_CACHE:-/var/cache/rdmanet-lab}
KVER73=${RDMANET_LAB_KVER73:-7.3.4+deb13-amd64}
log() { echo "fetch.sh: $*" >&2; }
die() { echo "fetch.sh: FATAL: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (installs packages, writes $CACHE)"

# --- host packages -----------------------------------------------------------
# One dpkg-query for all; apt-get only runs when something is missing, so a
# warm run costs ~50 ms.
HOST_PKGS="qemu-system-x86 busybox-static kmod cpio xz-utils zstd iproute2
ibverbs-utils ibverbs-providers rdmacm-utils perftest tcpdump
libucx0 ucx-utils openmpi-bin libopenmpi3
dropbear-bin etcd-server etcd-client python3"
missing=""
for p in $HOST_PKGS; do
    st=$(dpkg-query -W -f '${db:Status-Abbrev}' "$p" 2>/dev/null || true)
    case "$st" in ii*) ;; *) missing="$missing $p" ;; esac
done
if [ -n "$missing" ]; then
    log "installing host packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    # The guests run their own etcd: the package's service must not start on the host. A
    # policy-rc.d that refuses every start does it (ours only if there was none).
    policy_ours=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        policy_ours=1
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    # --no-install-recommends keeps qemu from pulling a GUI stack.
    if ! apt-get install -y -q --no-install-recommends $missing >&2; then
        apt-get update -q >&2 || die "apt-get update failed (no network to the mirror?)"
        apt-get install -y -q --no-install-recommends $missing >&2 \
            || die "cannot install:$missing"
    fi
    [ -z "$policy_ours" ] || { rm -f /usr/sbin/policy-rc.d; trap - EXIT; }
fi

# --- which mirror --------------------------------------------------------------
# The Debian mirror the host's own sources use (never a hard-coded one).
MIRROR=$("$(dirname "$0")/../tools/debian_mirror.sh") || die "no Debian mirror for this release found in /etc/apt/sources*"

# --- private APT -------------------------------------------------------------------
APTDIR=$CACHE/apt
setup_private_apt() {
    mkdir -p "$APTDIR/state/lists/partial" "$APTDIR/cache/archives/partial" "$APTDIR/etc/preferences.d" "$APTDIR/etc/sources.list.d"
    # bookworm for Debian 12's own 6.1 kernel, trixie-backports for 7.3.
    cat > "$APTDIR/etc/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR bookworm main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR trixie-backports main
SRC
    touch "$APTDIR/state/status"
    # Everything points into $APTDIR: lists, archives, status, sources, prefs.
    cat > "$APTDIR/apt.conf" <<CONF
Dir::State "$APTDIR/state";
Dir::State::status "$APTDIR/state/status";
Dir::Cache "$APTDIR/cache";
Dir::Etc::SourceList "$APTDIR/etc/sources.list";
Dir::Etc::SourceParts "$APTDIR/etc/sources.list.d";
Dir::Etc::Preferences "$APTDIR/etc/preferences";
Dir::Etc::PreferencesParts "$APTDIR/etc/preferences.d";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
Acquire::Languages "none";
Acquire::Retries "3";
// Downloads land in a root-only temp dir; the _apt sandbox user cannot write there.
APT::Sandbox::User "root";
CONF
}
private_apt() { APT_CONFIG=$APTDIR/apt.conf "$@"; }
apt_updated=0
private_apt_update() {
    [ "$apt_updated" -eq 0 ] || return 0
    setup_private_apt
    log "updating private APT indexes from $MIRROR (bookworm, trixie-backports)"
    private_apt apt-get update -q >&2 || die "private apt-get update failed (no network to $MIRROR?)"
    # apt-get update exits 0 even when a source failed: check the lists really came.
    ls "$APTDIR/state/lists/"*trixie-backports*Packages* >/dev/null 2>&1 \
        || die "trixie-backports index missing after apt-get update (mirror unreachable?)"
    apt_updated=1
}

# --- kernels ---------------------------------------------------------------------
# extract ALIAS PKG...: download PKGs, dpkg -x them into a scratch dir, keep
# only vmlinuz + the modules tree; $dst/.complete marks a finished extraction so
# an interrupted run is redone, not trusted.
extract() {
    alias=$1; shift
    dst=$CACHE/kernels/$alias
    tmp=$(mktemp -d "$CACHE/tmp.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    log "downloading $*"
    t0=$(date +%s)
    ( cd "$tmp" && private_apt apt-get download -q "$@" >&2 ) || die "apt-get download $* failed"
    log "downloaded in $(( $(date +%s) - t0 ))s; extracting"
    mkdir "$tmp/root"
    for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$tmp/root"; done
    # Layouts: boot/vmlinuz-<ver> + lib/modules/<ver> (classic) or
    # usr/lib/modules/<ver>/{vmlinuz,kernel/...} (6.19+ split packages).
    moddir=$(ls -d "$tmp"/root/lib/modules/* "$tmp"/root/usr/lib/modules/* 2>/dev/null | head -n1)
    [ -n "$moddir" ] || die "no modules directory in $*"
    kver=$(basename "$moddir")
    vmlinuz=""
    for c in "$tmp/root/boot/vmlinuz-$kver" "$moddir/vmlinuz"; do
        [ -f "$c" ] && { vmlinuz=$c; break; }
    done
    [ -n "$vmlinuz" ] || die "no vmlinuz for $kver in $*"
    rm -rf "$dst"; mkdir -p "$dst/lib/modules"
    mv "$vmlinuz" "$dst/vmlinuz"
    mv "$moddir" "$dst/lib/modules/$kver"
    # Split 7.x packages ship no modules.dep (their postinst runs depmod):
    # generate it, modprobe --show-depends needs it.
    [ -f "$dst/lib/modules/$kver/modules.dep" ] || depmod -b "$dst" "$kver"
    echo "$kver" > "$dst/kver"
    echo "$*" > "$dst/packages"
    touch "$dst/.complete"
    rm -rf "$tmp"; trap - EXIT
    log "$alias: kernel $kver ready in $dst"
}

# --- QEMU from Debian 13 ------------------------------------------------------------
# Its closure includes trixie's glibc: the tree's loader runs it with the tree's
# libraries only. QEMU_MODULE_DIR keeps it from loading the host QEMU's modules
# (which it refuses, then aborts); -L points at its own firmware.
# A private APT configuration for Debian 13 (trixie main), nothing installed in its
# status file so that a download takes a package's whole closure.
trixie_updated=0
setup_trixie_apt() {
    apt=$CACHE/apt-trixie
    [ "$trixie_updated" -eq 0 ] || return 0
    setup_private_apt
    mkdir -p "$apt/state/lists/partial" "$apt/cache/archives/partial" "$apt/etc/preferences.d" \
        "$apt/etc/sources.list.d"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR trixie main" \
        > "$apt/etc/sources.list"
    : > "$apt/state/status"   # nothing installed: the whole closure is downloaded
    sed -e "s|$APTDIR|$apt|g" "$APTDIR/apt.conf" > "$apt/apt.conf"
    echo 'APT::Install-Recommends "false";' >> "$apt/apt.conf"
    log "updating the private trixie index from $MIRROR"
    APT_CONFIG=$apt/apt.conf apt-get update -q >&2 || die "apt-get update (trixie) failed"
    trixie_updated=1
}

fetch_qemu() {
    [ -f "$CACHE/qemu/.complete" ] && return 0
    setup_trixie_apt
    rm -f "$apt/cache/archives/"*.deb
    t0=$(date +%s)
    APT_CONFIG=$apt/apt.conf apt-get install --download-only -y -qq qemu-system-x86 >&2 \
        || die "cannot download qemu-system-x86 and its dependencies from trixie"
    tmp=$(mktemp -d "$CACHE/tmp.XXXXXX")
    for deb in "$apt/cache/archives/"*.deb; do dpkg -x "$deb" "$tmp/tree"; done
    rm -rf "$CACHE/qemu"; mkdir -p "$CACHE/qemu"
    mv "$tmp/tree" "$CACHE/qemu/tree"; rm -rf "$tmp"
    rm -f "$apt/cache/archives/"*.deb
    lib=$CACHE/qemu/tree/usr/lib/x86_64-linux-gnu
    cat > "$CACHE/qemu/qemu-system-x86_64" <<LAUNCH
#!/bin/sh
# QEMU from Debian 13, unpacked by fetch.sh, run through its own loader and libraries.
QEMU_MODULE_DIR=$lib/qemu exec $lib/ld-linux-x86-64.so.2 \\
    --library-path $lib $CACHE/qemu/tree/usr/bin/qemu-system-x86_64 \\
    -L $CACHE/qemu/tree/usr/share/qemu -L $CACHE/qemu/tree/usr/share/seabios "\$@"
LAUNCH
    chmod 755 "$CACHE/qemu/qemu-system-x86_64"
    version=$("$CACHE/qemu/qemu-system-x86_64" --version | sed -n 's/^QEMU emulator version \([0-9.]*\).*/\1/p')
    case "$version" in
        [8-9].*|[1-9][0-9].*) ;;
        *) die "the unpacked QEMU does not run or is older than 8.0 ('$version')" ;;
    esac
    "$CACHE/qemu/qemu-system-x86_64" -device igb,help >/dev/null 2>&1 \
        || die "QEMU $version has no igb model"
    echo "$version" > "$CACHE/qemu/version"
    touch "$CACHE/qemu/.complete"
    log "QEMU $version ready in $CACHE/qemu ($(( $(date +%s) - t0 ))s)"
}

# --- the CRI API from Debian 13 --------------------------------------------------------
# The CRI tier (tests/cri) drives containerd over CRI v1; Debian 12 packages no
# api.proto, Debian 13's golang-github-kubernetes-cri-api-dev does. Only that file is
# kept, as $CACHE/cri-api/api.proto (never copied into the repo).
fetch_cri_api() {
    [ -f "$CACHE/cri-api/.complete" ] && return 0
    setup_trixie_apt
    tmp=$(mktemp -d "$CACHE/tmp.XXXXXX")
    ( cd "$tmp" && APT_CONFIG=$apt/apt.conf apt-get download -q golang-github-kubernetes-cri-api-dev >&2 ) \
        || die "cannot download golang-github-kubernetes-cri-api-dev from trixie"
    dpkg -x "$tmp"/*.deb "$tmp/root"
    proto=$(find "$tmp/root" -path '*/cri-api/pkg/apis/runtime/v1/api.proto' | head -n1)
    [ -n "$proto" ] || die "no runtime/v1/api.proto in golang-github-kubernetes-cri-api-dev"
    rm -rf "$CACHE/cri-api"; mkdir -p "$CACHE/cri-api"
    cp "$proto" "$CACHE/cri-api/api.proto"
    dpkg-deb -f "$tmp"/*.deb Version > "$CACHE/cri-api/version"
    rm -rf "$tmp"
    touch "$CACHE/cri-api/.complete"
    log "CRI api.proto $(cat "$CACHE/cri-api/version") ready in $CACHE/cri-api"
}

fetch_alias() {
    case "$1" in
        qemu) fetch_qemu; return 0 ;;
        cri-api) fetch_cri_api; return 0 ;;
    esac
    [ -f "$CACHE/kernels/$1/.complete" ] && return 0
    private_apt_update
    case "$1" in
        7.3)
            extract 7.3 "linux-binary-$KVER73" "linux-modules-$KVER73" ;;
        6.1)
            # linux-image-amd64 is a metapackage: resolve the real image it
            # depends on in bookworm (not the newer one in trixie-backports).
            real=$(private_apt apt-cache show linux-image-amd64/bookworm 2>/dev/null \
                | sed -n 's/^Depends: *\(linux-image-[^ ,]*\).*/\1/p' | head -n1)
            [ -n "$real" ] || die "cannot resolve linux-image-amd64 in bookworm"
            extract 6.1 "$real/bookworm" ;;
        *) die "unknown alias '$1' (known: 7.3 6.1 qemu cri-api)" ;;
    esac
}

mkdir -p "$CACHE"
# One fetch at a time (two ctest jobs might start together).
exec 9>"$CACHE/.fetch.lock"
flock 9
[ $# -gt 0 ] || set -- 7.3 6.1 qemu cri-api
for a in "$@"; do fetch_alias "$a"; done
