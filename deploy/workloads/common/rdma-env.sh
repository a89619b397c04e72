#!/bin/sh
# Runs on every MPI rank before NCCL: finds the pod's own RDMA device and, for
# RoCE, the RoCE v2 GID index of the pod's address, exports them as
# NCCL_IB_HCA / NCCL_IB_GID_INDEX (unless already set), then execs the command.
#
# Why not fixed values: with a shared HCA (scenario 1) the pod sees every
# pod's GIDs in the one table, and its own index depends on the order pods
# came up; device names (mlx5_N, rxe...) differ from node to node. The GID of
# an IPv4 address is ::ffff:a.b.c.d, so the pod's address identifies its GID.
# Needs `ip` (iproute2) in the image.
set -eu
ifname=${RDMA_IFNAME:-net1}
sys=${RDMA_ENV_SYSFS:-/sys}  # tests point it at a fake tree
export NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-$ifname}"

fail() { echo "rdma-env: $*" >&2; exit 1; }
[ -d "$sys/class/net/$ifname" ] || fail "no interface $ifname: is the pod's k8s.v1.cni.cncf.io/networks annotation right?"

# A VF or PF in the pod has its RDMA device under its PCI device.
hca=""
for d in "$sys/class/net/$ifname"/device/infiniband/*; do
  [ -e "$d" ] && hca=$(basename "$d")
done

layer=""
[ -z "$hca" ] || layer=$(cat "$sys/class/infiniband/$hca/ports/1/link_layer" 2>/dev/null || true)
idx=""
if [ "$layer" != "InfiniBand" ]; then
  ip4=$(ip -4 -o addr show dev "$ifname" | awk '{print $4}' | cut -d/ -f1 | head -n1)
  [ -n "$ip4" ] || fail "$ifname has no IPv4 address"
  IFS=. read -r o1 o2 o3 o4 <<END
$ip4
END
  want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$o1" "$o2" "$o3" "$o4")
  for dev in "$sys"/class/infiniband/*; do
    [ -z "$hca" ] || [ "$(basename "$dev")" = "$hca" ] || continue
    for g in "$dev"/ports/1/gids/*; do
      [ "$(cat "$g" 2>/dev/null)" = "$want" ] || continue
      n=$(basename "$g")
      [ "$(cat "$dev/ports/1/gid_attrs/types/$n" 2>/dev/null)" = "RoCE v2" ] || continue
      hca=$(basename "$dev")
      idx=$n
      break 2
    done
  done
  [ -n "$idx" ] || fail "no RoCE v2 GID for $ip4 on ${hca:-any RDMA device}"
fi
[ -n "$hca" ] || fail "no RDMA device for $ifname"

# "=" makes NCCL match the name exactly (mlx5_1 must not match mlx5_10).
export NCCL_IB_HCA="${NCCL_IB_HCA:-=$hca}"
[ -z "$idx" ] || export NCCL_IB_GID_INDEX="${NCCL_IB_GID_INDEX:-$idx}"
echo "rdma-env: $(hostname): $ifname -> NCCL_IB_HCA=$NCCL_IB_HCA NCCL_IB_GID_INDEX=${NCCL_IB_GID_INDEX:-} NCCL_SOCKET_IFNAME=$NCCL_SOCKET_IFNAME" >&2
exec "$@"
