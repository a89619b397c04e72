#!/bin/sh
# rdmanet node preparation (opt-in): sets the RDMA subsystem's netns mode the
# way operators do, and reports the node's RDMA state in the log.
#
# In exclusive mode (ib_core netns_mode=0) an RDMA device belongs to exactly
# one network namespace, so rdmanet can move a VF's RDMA device into the pod
# and no other pod sees it. The mode is a module parameter read when ib_core
# loads, hence the modprobe.d option: it takes effect at the next boot (or
# next load of ib_core; if the NIC driver is in the initramfs, the initramfs
# must be rebuilt too). Switching live (`rdma system set netns exclusive`)
# only works while no network namespace other than the host's exists, which
# on a Kubernetes node means before the first pod: the kernel answers EBUSY.
#
# Usage: node-prep.sh [--root DIR] [--exclusive | --shared] [--live]
#   --root DIR    the host's root as seen here (/host in the DaemonSet; a temp
#                 directory in tests, so they never touch this machine)
#   --exclusive   write DIR/etc/modprobe.d/rdmanet-netns.conf
#   --shared      remove that file (shared is the kernel's default)
#   --live        also try to switch the running kernel now, whatever --root
#                 is (needs the host network namespace and CAP_NET_ADMIN;
#                 failure is reported, not fatal)
# Env: RDMANET   the rdmanet binary that reads and switches the mode over RDMA
#                netlink (default: the image's, /opt/rdmanet/bin/rdmanet)
# Without --exclusive/--shared it only reports. Always exits 0 after a report,
# so a node where the switch is pending still gets the plugin installed; a NAD
# with rdmaIsolation "required" refuses pods there with a clear error instead.
set -eu

root=/
want=""
RDMANET=${RDMANET:-/opt/rdmanet/bin/rdmanet}
live=0
while [ $# -gt 0 ]; do
  case $1 in
    --root) root=$2; shift 2 ;;
    --exclusive) want=exclusive; shift ;;
    --shared) want=shared; shift ;;
    --live) live=1; shift ;;
    *) echo "usage: $0 [--root DIR] [--exclusive | --shared] [--live]" >&2; exit 2 ;;
  esac
done
root=${root%/}
conf="$root/etc/modprobe.d/rdmanet-netns.conf"
sys="$root/sys"

log() { echo "rdmanet-node-prep: $*" >&2; }

# The mode in force: ib_core's parameter (0 exclusive, 1 shared).
current_mode() {
  p="$sys/module/ib_core/parameters/netns_mode"
  if [ ! -r "$p" ]; then
    echo "unknown (ib_core not loaded)"
  elif [ "$(cat "$p")" = 0 ] || [ "$(cat "$p")" = N ]; then
    echo exclusive
  else
    echo shared
  fi
}

case $want in
  exclusive)
    mkdir -p "$(dirname "$conf")"
    tmp="$conf.tmp.$$"
    printf '%s\n' "# Written by rdmanet node-prep: RDMA devices in exclusive netns mode." \
      "options ib_core netns_mode=0" >"$tmp"
    mv -f "$tmp" "$conf"
    log "wrote $conf (takes effect when ib_core next loads: reboot; rebuild the initramfs if it carries the NIC driver)"
    ;;
  shared)
    rm -f "$conf"
    log "removed $conf (shared mode from the next boot)"
    ;;
esac

if [ "$live" = 1 ] && [ -n "$want" ] && [ "$(current_mode)" != "$want" ]; then
  if [ ! -x "$RDMANET" ]; then
    log "--live: no rdmanet binary at $RDMANET"
  elif err=$("$RDMANET" rdma-netns-mode "$want" 2>&1 >/dev/null); then
    log "switched to $want netns mode now"
  else
    log "live switch to $want refused ($err; EBUSY while any other netns exists, i.e. any pod): pending until reboot"
  fi
fi

# Report: mode, pending mode, devices, their netdevs, ports and GIDs in use.
mode=$(current_mode)
pending=shared
[ -f "$conf" ] && pending=exclusive
log "netns mode: $mode (configured for next boot: $pending)"
if [ -x "$RDMANET" ]; then
  # The kernel's own answer over RDMA netlink (this network namespace's view).
  log "rdma netns mode (netlink): $("$RDMANET" rdma-netns-mode 2>&1 || true)"
fi
found=0
for dev in "$sys"/class/infiniband/*; do
  [ -e "$dev" ] || continue
  found=1
  name=$(basename "$dev")
  netdevs=""
  for n in "$dev"/device/net/*; do
    [ -e "$n" ] && netdevs="$netdevs$(basename "$n") "
  done
  # soft-RoCE devices have no PCI device; their netdev is in "parent".
  [ -n "$netdevs" ] || netdevs=$(cat "$dev/parent" 2>/dev/null || true)
  pci=$(basename "$(readlink "$dev/device" 2>/dev/null || echo -)")
  log "rdma device $name pci $pci netdevs: ${netdevs:-none}"
  for port in "$dev"/ports/*; do
    [ -d "$port" ] || continue
    p=$(basename "$port")
    log "  port $p state $(cat "$port/state" 2>/dev/null || echo ?) link_layer $(cat "$port/link_layer" 2>/dev/null || echo ?)"
    for gid in "$port"/gids/*; do
      [ -r "$gid" ] || continue
      value=$(cat "$gid" 2>/dev/null || true)
      case $value in "" | 0000:0000:0000:0000:0000:0000:0000:0000) continue ;; esac
      i=$(basename "$gid")
      type=$(cat "$port/gid_attrs/types/$i" 2>/dev/null || echo ?)
      ndev=$(cat "$port/gid_attrs/ndevs/$i" 2>/dev/null || echo ?)
      log "    gid $i $value $type ndev $ndev"
    done
  done
done
[ "$found" = 1 ] || log "no RDMA devices visible (in exclusive mode, devices moved into pods are not listed here)"
exit 0
