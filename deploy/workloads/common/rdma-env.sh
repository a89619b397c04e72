#!/bin/sh
# Runs on every MPI rank before NCCL: sets NCCL_IB_HCA, NCCL_IB_GID_INDEX (or, when the
# rails' GID indexes differ, NCCL_IB_ADDR_FAMILY and NCCL_IB_ADDR_RANGE), NCCL_SOCKET_IFNAME
# and UCX_NET_DEVICES for the pod's RDMA rails (unless already set), then execs the command.
#
# 1. rdmanet's own account of the pod's rails, when the pod mounts it: rdmanet writes
#    <podInfoDir>/<pod UID>/rdma.env on the node (default podInfoDir /run/rdmanet/pods);
#    the workloads mount /run/rdmanet/pods with subPathExpr $(POD_UID) at /run/rdmanet/pod.
#    RDMA_ENV_FILE overrides the path.
# 2. Otherwise it finds the rails itself: the interfaces in RDMA_IFNAMES (default: every
#    netN of the pod, in N order), each one's RDMA device and, for RoCE, the RoCE v2 GID of
#    its address (IPv4, else its global IPv6 address). With a shared HCA (scenario 1) the
#    pod sees every pod's GIDs in the one table and its own index depends on the order pods
#    came up; device names (mlx5_N, rxe...) differ from node to node; so nothing is fixed.
# Needs `ip` (iproute2) in the image for 2.
set -eu
sys=${RDMA_ENV_SYSFS:-/sys}  # tests point it at a fake tree
envfile=${RDMA_ENV_FILE:-/run/rdmanet/pod/rdma.env}

fail() { echo "rdma-env: $*" >&2; exit 1; }
# set_default KEY VALUE: export KEY=VALUE unless the user set KEY already.
set_default() {
  case $1 in '' | *[!A-Z0-9_]*) return 0 ;; esac  # only names, never code, reach eval
  eval "[ -n \"\${$1+x}\" ]" || export "$1=$2"
}
report() {
  echo "rdma-env: $(hostname): $1: NCCL_IB_HCA=${NCCL_IB_HCA:-} NCCL_IB_GID_INDEX=${NCCL_IB_GID_INDEX:-}" \
    "NCCL_IB_ADDR_FAMILY=${NCCL_IB_ADDR_FAMILY:-} NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-}" >&2
}

if [ -r "$envfile" ]; then
  while IFS='=' read -r key value; do
    case $key in '' | '#'*) continue ;; esac
    set_default "$key" "$value"
  done <"$envfile"
  report "from $envfile"
  exec "$@"
fi

# --- discovery ---------------------------------------------------------------------------
ifnames=${RDMA_IFNAMES:-$(ls "$sys/class/net" 2>/dev/null | grep -E '^net[0-9]+$' | sort -t t -k 2 -n | tr '\n' ' ')}
[ -n "$ifnames" ] || fail "no interface net1: is the pod's k8s.v1.cni.cncf.io/networks annotation right?"

# gid_of ADDRESS: the address as sysfs shows GIDs (8 groups of 4 hex digits); IPv4 maps to
# ::ffff:a.b.c.d.
gid_of() {
  echo "$1" | awk '
    /\./ { split($0, o, "."); printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n", o[1], o[2], o[3], o[4]; exit }
    {
      n = split($0, halves, "::"); left = halves[1]; right = (n > 1) ? halves[2] : ""
      nl = (left == "") ? 0 : split(left, l, ":"); nr = (right == "") ? 0 : split(right, r, ":")
      out = ""
      for (i = 1; i <= nl; i++) out = out sprintf("%04s:", l[i])
      for (i = 0; i < 8 - nl - nr; i++) out = out "0000:"
      for (i = 1; i <= nr; i++) out = out sprintf("%04s:", r[i])
      gsub(/ /, "0", out); print tolower(substr(out, 1, length(out) - 1))
    }'
}

hcas="" indexes="" family=AF_INET sockets=""
for ifname in $ifnames; do
  [ -d "$sys/class/net/$ifname" ] || fail "no interface $ifname: is the pod's k8s.v1.cni.cncf.io/networks annotation right?"
  sockets="${sockets:+$sockets,}$ifname"
  # A VF or PF in the pod has its RDMA device under its PCI device; a macvlan child of a
  # shared HCA has none, and its HCA is found by the GID below.
  hca=""
  for d in "$sys/class/net/$ifname"/device/infiniband/*; do
    [ -e "$d" ] && hca=$(basename "$d")
  done
  layer=""
  [ -z "$hca" ] || layer=$(cat "$sys/class/infiniband/$hca/ports/1/link_layer" 2>/dev/null || true)
  idx=""
  if [ "$layer" != "InfiniBand" ]; then
    addr=$(ip -4 -o addr show dev "$ifname" | awk '{print $4}' | cut -d/ -f1 | head -n1)
    if [ -z "$addr" ]; then
      addr=$(ip -6 -o addr show dev "$ifname" scope global | awk '{print $4}' | cut -d/ -f1 | head -n1)
      [ -z "$addr" ] || family=AF_INET6
    fi
    [ -n "$addr" ] || fail "$ifname has no IPv4 or global IPv6 address"
    want=$(gid_of "$addr")
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
    [ -n "$idx" ] || fail "no RoCE v2 GID for $addr ($ifname) on ${hca:-any RDMA device}"
    indexes="$indexes $idx"
  fi
  [ -n "$hca" ] || fail "no RDMA device for $ifname"
  hcas="${hcas:+$hcas,}$hca:1"
done

# "=" makes NCCL match names exactly (mlx5_1 must not match mlx5_10).
set_default NCCL_IB_HCA "=$hcas"
set_default UCX_NET_DEVICES "$hcas"
set_default NCCL_SOCKET_IFNAME "=$sockets"
distinct=$(echo $indexes | tr ' ' '\n' | grep . | sort -u | wc -l)
if [ "$distinct" -eq 1 ]; then
  set_default NCCL_IB_GID_INDEX "$(echo $indexes | cut -d' ' -f1)"
elif [ "$distinct" -gt 1 ]; then
  # Each rail's GID sits at another index: NCCL picks each one by family itself.
  set_default NCCL_IB_ADDR_FAMILY "$family"
fi
report "found"
exec "$@"
