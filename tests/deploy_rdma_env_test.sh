#!/bin/sh
# shellcheck disable=SC2015,SC2016 # ok() always succeeds; the inner sh expands
# deploy/workloads/common/rdma-env.sh against fake sysfs trees: picks the
# pod's own HCA and RoCE v2 GID index by its address (shared HCA with other
# pods' GIDs; a VF; InfiniBand without GID), and fails clearly otherwise.
# Usage: deploy_rdma_env_test.sh RDMA_ENV_SH
set -eu
envsh=$1
t=$(mktemp -d /tmp/rdmanet-rdma-env.XXXXXX)
trap 'rm -rf "$t"' EXIT
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }

# `ip -4 -o addr show dev net1` as the pod would answer it.
mkdir -p "$t/bin"
cat >"$t/bin/ip" <<'IP'
#!/bin/sh
echo "5: net1    inet $POD_IP/24 brd 192.168.100.255 scope global net1\       valid_lft forever preferred_lft forever"
IP
chmod +x "$t/bin/ip"
PATH="$t/bin:$PATH"
export PATH

gid() { # DIR INDEX VALUE TYPE
  mkdir -p "$1/ports/1/gids" "$1/ports/1/gid_attrs/types"
  echo "$3" >"$1/ports/1/gids/$2"
  echo "$4" >"$1/ports/1/gid_attrs/types/$2"
}
run() { # SYSFS POD_IP -> prints the environment rdma-env.sh exports
  env -u NCCL_IB_HCA -u NCCL_IB_GID_INDEX -u NCCL_SOCKET_IFNAME RDMA_ENV_SYSFS="$1" POD_IP="$2" \
    sh "$envsh" sh -c 'echo "$NCCL_IB_HCA ${NCCL_IB_GID_INDEX:-none} $NCCL_SOCKET_IFNAME"' 2>/dev/null
}

# Shared HCA (macvlan net1 has no PCI device): two pods' GIDs in one table.
s="$t/shared"
mkdir -p "$s/class/net/net1"
gid "$s/class/infiniband/mlx5_0" 2 0000:0000:0000:0000:0000:ffff:c0a8:6411 "IB/RoCE v1"
gid "$s/class/infiniband/mlx5_0" 3 0000:0000:0000:0000:0000:ffff:c0a8:6411 "RoCE v2"
gid "$s/class/infiniband/mlx5_0" 5 0000:0000:0000:0000:0000:ffff:c0a8:6412 "RoCE v2"
gid "$s/class/infiniband/mlx5_1" 3 0000:0000:0000:0000:0000:ffff:0a000001 "RoCE v2"
[ "$(run "$s" 192.168.100.18)" = "=mlx5_0 5 net1" ] && ok "shared HCA: the pod's own v2 GID" || bad "shared HCA: $(run "$s" 192.168.100.18)"
[ "$(run "$s" 192.168.100.17)" = "=mlx5_0 3 net1" ] && ok "shared HCA: v2, not v1" || bad "shared v2: $(run "$s" 192.168.100.17)"
run "$s" 192.168.100.99 >/dev/null && bad "an address without GID passes" || ok "fails when no GID has the pod's address"

# A VF in exclusive mode: its RDMA device is under the netdev's PCI device.
v="$t/vf"
mkdir -p "$v/devices/vf/infiniband/mlx5_7" "$v/class/net/net1" "$v/class/infiniband"
ln -s "$v/devices/vf" "$v/class/net/net1/device"
gid "$v/class/infiniband/mlx5_7" 3 0000:0000:0000:0000:0000:ffff:c0a8:6e11 "RoCE v2"
echo Ethernet >"$v/class/infiniband/mlx5_7/ports/1/link_layer"
[ "$(run "$v" 192.168.110.17)" = "=mlx5_7 3 net1" ] && ok "VF: its HCA and GID" || bad "VF: $(run "$v" 192.168.110.17)"

# InfiniBand: the HCA only, no GID index.
i="$t/ib"
mkdir -p "$i/devices/vf/infiniband/mlx5_9" "$i/class/net/net1" "$i/class/infiniband/mlx5_9/ports/1"
ln -s "$i/devices/vf" "$i/class/net/net1/device"
echo InfiniBand >"$i/class/infiniband/mlx5_9/ports/1/link_layer"
[ "$(run "$i" 192.168.120.17)" = "=mlx5_9 none net1" ] && ok "InfiniBand: HCA, no GID index" || bad "IB: $(run "$i" 192.168.120.17)"

# No net1 at all: a clear error.
err=$(RDMA_ENV_SYSFS="$t/none" sh "$envsh" true 2>&1) && bad "passes without net1" ||
  { echo "$err" | grep -q "no interface net1" && ok "names the missing interface" || bad "missing net1: $err"; }

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
