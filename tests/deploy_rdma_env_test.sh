#!/bin/sh
# shellcheck disable=SC2015,SC2016 # ok() always succeeds; the inner sh expands
# deploy/workloads/common/rdma-env.sh: with rdmanet's rdma.env for the pod it takes that
# (a variable the user set wins); without, against fake sysfs trees, it finds each rail's
# HCA and RoCE v2 GID index by the rail's address (shared HCA with other pods' GIDs; a VF;
# InfiniBand without GID; eight rails in netN order; rails whose indexes differ; IPv6), and
# fails clearly otherwise.
# Usage: deploy_rdma_env_test.sh RDMA_ENV_SH
set -eu
envsh=$1
t=$(mktemp -d /tmp/rdmanet-rdma-env.XXXXXX)
trap 'rm -rf "$t"' EXIT
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }

# `ip -4|-6 -o addr show dev IF [scope global]` as the pod would answer it: the address is
# in $IP4_<IF> or $IP6_<IF>.
mkdir -p "$t/bin"
cat >"$t/bin/ip" <<'IP'
#!/bin/sh
fam=$1; dev=$6
eval "a=\${IP${fam#-}_$dev:-}"
[ -z "$a" ] || echo "5: $dev    inet $a/24 brd + scope global $dev\       valid_lft forever preferred_lft forever"
IP
chmod +x "$t/bin/ip"
PATH="$t/bin:$PATH"
export PATH

gid() { # DIR INDEX VALUE TYPE
  mkdir -p "$1/ports/1/gids" "$1/ports/1/gid_attrs/types"
  echo "$3" >"$1/ports/1/gids/$2"
  echo "$4" >"$1/ports/1/gid_attrs/types/$2"
}
vf() { # TREE IFNAME HCA LINK_LAYER
  mkdir -p "$1/devices/$2/infiniband/$3" "$1/class/net/$2" "$1/class/infiniband/$3/ports/1"
  ln -s "$1/devices/$2" "$1/class/net/$2/device"
  echo "$4" >"$1/class/infiniband/$3/ports/1/link_layer"
}
# run SYSFS [VAR=VALUE...] -> what rdma-env.sh exports
run() {
  s=$1
  shift
  env -u NCCL_IB_HCA -u NCCL_IB_GID_INDEX -u NCCL_SOCKET_IFNAME -u NCCL_IB_ADDR_FAMILY \
    -u UCX_NET_DEVICES RDMA_ENV_SYSFS="$s" RDMA_ENV_FILE="$t/no-such-file" "$@" \
    sh "$envsh" sh -c 'echo "$NCCL_IB_HCA ${NCCL_IB_GID_INDEX:-none} $NCCL_SOCKET_IFNAME ${NCCL_IB_ADDR_FAMILY:-}"' 2>/dev/null
}

# Shared HCA (macvlan net1 has no PCI device): two pods' GIDs in one table.
s="$t/shared"
mkdir -p "$s/class/net/net1"
gid "$s/class/infiniband/mlx5_0" 2 0000:0000:0000:0000:0000:ffff:c0a8:6411 "IB/RoCE v1"
gid "$s/class/infiniband/mlx5_0" 3 0000:0000:0000:0000:0000:ffff:c0a8:6411 "RoCE v2"
gid "$s/class/infiniband/mlx5_0" 5 0000:0000:0000:0000:0000:ffff:c0a8:6412 "RoCE v2"
gid "$s/class/infiniband/mlx5_1" 3 0000:0000:0000:0000:0000:ffff:0a000001 "RoCE v2"
[ "$(run "$s" IP4_net1=192.168.100.18)" = "=mlx5_0:1 5 =net1 " ] && ok "shared HCA: the pod's own v2 GID" || bad "shared HCA: $(run "$s" IP4_net1=192.168.100.18)"
[ "$(run "$s" IP4_net1=192.168.100.17)" = "=mlx5_0:1 3 =net1 " ] && ok "shared HCA: v2, not v1" || bad "shared v2: $(run "$s" IP4_net1=192.168.100.17)"
run "$s" IP4_net1=192.168.100.99 >/dev/null && bad "an address without GID passes" || ok "fails when no GID has the pod's address"

# A VF in exclusive mode: its RDMA device is under the netdev's PCI device.
v="$t/vf"
vf "$v" net1 mlx5_7 Ethernet
gid "$v/class/infiniband/mlx5_7" 3 0000:0000:0000:0000:0000:ffff:c0a8:6e11 "RoCE v2"
[ "$(run "$v" IP4_net1=192.168.110.17)" = "=mlx5_7:1 3 =net1 " ] && ok "VF: its HCA and GID" || bad "VF: $(run "$v" IP4_net1=192.168.110.17)"

# InfiniBand: the HCA only, no GID index.
i="$t/ib"
vf "$i" net1 mlx5_9 InfiniBand
[ "$(run "$i")" = "=mlx5_9:1 none =net1 " ] && ok "InfiniBand: HCA, no GID index" || bad "IB: $(run "$i")"

# Eight rails (net1..net8 plus net10 to check the order), one GID index each.
e="$t/eight"
envs=""
for k in 1 2 3 4 5 6 7 8 10; do
  vf "$e" "net$k" "mlx5_$k" Ethernet
  gid "$e/class/infiniband/mlx5_$k" 3 "0000:0000:0000:0000:0000:ffff:c0a8:78$(printf %02x "$k")" "RoCE v2"
  envs="$envs IP4_net$k=192.168.120.$k"
done
want="=mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_10:1 3 =net1,net2,net3,net4,net5,net6,net7,net8,net10 "
# shellcheck disable=SC2086 # $envs: VAR=VALUE words
[ "$(run "$e" $envs)" = "$want" ] && ok "nine rails in netN order, one GID index" || bad "rails: $(run "$e" $envs)"
# shellcheck disable=SC2086
[ "$(run "$e" $envs RDMA_IFNAMES="net2 net1")" = "=mlx5_2:1,mlx5_1:1 3 =net2,net1 " ] && ok "RDMA_IFNAMES picks and orders" || bad "RDMA_IFNAMES: $(run "$e" $envs RDMA_IFNAMES="net2 net1")"
# Rail 2's GID at another index: NCCL picks each rail's GID by family.
gid "$e/class/infiniband/mlx5_2" 3 "0000:0000:0000:0000:0000:ffff:0a00:0001" "RoCE v2"
gid "$e/class/infiniband/mlx5_2" 4 "0000:0000:0000:0000:0000:ffff:c0a8:7802" "RoCE v2"
# shellcheck disable=SC2086
out=$(run "$e" $envs RDMA_IFNAMES="net1 net2")
[ "$out" = "=mlx5_1:1,mlx5_2:1 none =net1,net2 AF_INET" ] && ok "different GID indexes: NCCL_IB_ADDR_FAMILY" || bad "indexes differ: $out"

# An IPv6 rail: the GID is the address itself.
six="$t/v6"
vf "$six" net1 mlx5_3 Ethernet
gid "$six/class/infiniband/mlx5_3" 0 fe80:0000:0000:0000:0000:0000:0000:0001 "IB/RoCE v1"
gid "$six/class/infiniband/mlx5_3" 5 fd00:0056:0000:0000:0000:0000:0000:0011 "RoCE v2"
[ "$(run "$six" IP6_net1=fd00:56::11)" = "=mlx5_3:1 5 =net1 " ] && ok "IPv6 rail: its v2 GID" || bad "IPv6: $(run "$six" IP6_net1=fd00:56::11)"

# rdmanet's rdma.env for the pod: taken as it is; a variable the user set wins; a line that
# is no assignment of a name is ignored.
cat >"$t/rdma.env" <<'ENV'
# rdmanet: this pod's RDMA rails (see rails.json)
NCCL_IB_HCA==mlx5_3:1,mlx5_4:1
NCCL_IB_GID_INDEX=3
NCCL_SOCKET_IFNAME==net1,net2
$(touch /tmp/rdmanet-rdma-env-pwned)=x
ENV
out=$(env -u NCCL_IB_HCA -u NCCL_IB_GID_INDEX NCCL_SOCKET_IFNAME=eth0 RDMA_ENV_FILE="$t/rdma.env" RDMA_ENV_SYSFS="$t/none" \
  sh "$envsh" sh -c 'echo "$NCCL_IB_HCA $NCCL_IB_GID_INDEX $NCCL_SOCKET_IFNAME"' 2>/dev/null)
[ "$out" = "=mlx5_3:1,mlx5_4:1 3 eth0" ] && ok "rdmanet's rdma.env, the user's setting first" || bad "env file: $out"
[ ! -e /tmp/rdmanet-rdma-env-pwned ] && ok "no line of the file runs as code" || { bad "a line ran"; rm -f /tmp/rdmanet-rdma-env-pwned; }

# No net1 at all: a clear error.
err=$(RDMA_ENV_SYSFS="$t/none" RDMA_ENV_FILE="$t/no-such-file" sh "$envsh" true 2>&1) && bad "passes without net1" ||
  { echo "$err" | grep -q "no interface net1" && ok "names the missing interface" || bad "missing net1: $err"; }

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
