#!/bin/sh
# shellcheck disable=SC2015,SC2016 # ok() always succeeds; the inner sh expands
# deploy/workloads/common/rdma-env.sh: with rdmanet's rdma.env for the pod it takes that
# (a variable the user set wins; nccl.conf/ucx.conf beside it are exported). Without, from a
# network-status file as Multus writes it (Go's json.MarshalIndent, device-info) and fake
# sysfs and /proc trees: one rail, eight rails in the annotation's order, a shared HCA with
# other pods' GIDs, an IPv6 rail, soft-RoCE among other pods' soft-RoCE devices, InfiniBand,
# the default network skipped, the user's settings first, nccl.conf/ucx.conf; and it fails
# clearly on a missing file, an annotation without rails, a broken or hostile one.
# Usage: deploy_rdma_env_test.sh RDMA_ENV_SH
set -eu
envsh=$1
t=$(mktemp -d /tmp/rdmanet-rdma-env.XXXXXX)
trap 'rm -rf "$t"' EXIT
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
# expect NAME GOT WANT
expect() { [ "$2" = "$3" ] && ok "$1" || bad "$1: got [$2], want [$3]"; }

gid() { # DEVDIR INDEX VALUE TYPE
  mkdir -p "$1/ports/1/gids" "$1/ports/1/gid_attrs/types"
  echo "$3" >"$1/ports/1/gids/$2"
  echo "$4" >"$1/ports/1/gid_attrs/types/$2"
}
hca() { # TREE DEV LINK_LAYER
  mkdir -p "$1/class/infiniband/$2/ports/1"
  echo "$3" >"$1/class/infiniband/$2/ports/1/link_layer"
}
vf() { # TREE IFNAME DEV LINK_LAYER: a PCI function in the pod, its RDMA device under it
  mkdir -p "$1/devices/$2/infiniband/$3" "$1/class/net/$2"
  echo 1 >"$1/devices/$2/numa_node"
  ln -s "$1/devices/$2" "$1/class/net/$2/device"
  hca "$1" "$3" "$4"
}
netdev() { mkdir -p "$1/class/net/$2"; } # TREE IFNAME: a netdev without device (macvlan, veth)
route() {                                # TREE IFNAME HEXDEST HEXMASK: a connected route (x86 byte order)
  mkdir -p "$1/proc/net"
  [ -e "$1/proc/net/route" ] || printf 'Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n' >"$1/proc/net/route"
  printf '%s\t%s\t00000000\t0001\t0\t0\t0\t%s\t0\t0\t0\n' "$2" "$3" "$4" >>"$1/proc/net/route"
}
# status FILE ENTRY...: the annotation as Multus writes it (MarshalIndent, four spaces), the
# cluster network first. ENTRY: IFNAME|IPS(comma)|RDMA_DEVICE|PCI_ADDRESS (last two optional).
status() {
  _f=$1
  shift
  {
    printf '[\n    {\n        "name": "cbr0",\n        "interface": "eth0",\n        "ips": [\n'
    printf '            "10.244.1.5"\n        ],\n        "mac": "0a:58:0a:f4:01:05",\n'
    printf '        "default": true,\n        "dns": {}\n    }'
    for _e in "$@"; do
      IFS='|' read -r ifn ips rdev pci <<E
$_e
E
      printf ',\n    {\n        "name": "default/rail-%s",\n        "interface": "%s",\n        "ips": [\n' "$ifn" "$ifn"
      sep=""
      for a in $(echo "$ips" | tr ',' ' '); do
        printf '%s            "%s"' "$sep" "$a"
        sep=',
'
      done
      printf '\n        ],\n        "mac": "02:00:00:00:00:01",\n        "dns": {}'
      if [ -n "${pci:-}" ]; then
        printf ',\n        "device-info": {\n            "type": "pci",\n            "version": "1.1.0",\n'
        printf '            "pci": {\n                "pci-address": "%s",\n                "rdma-device": "%s"\n            }\n        }' "$pci" "$rdev"
      fi
      printf '\n    }'
    done
    printf '\n]'
  } >"$_f"
}
# run TREE [VAR=VALUE...] -> the variables rdma-env.sh exports (one KEY=value line each)
VARS="NCCL_IB_HCA NCCL_IB_GID_INDEX NCCL_IB_ADDR_FAMILY NCCL_IB_ADDR_RANGE NCCL_SOCKET_IFNAME UCX_NET_DEVICES NCCL_CONF_FILE UCX_CONFIG_DIR NCCL_IB_TC"
run() {
  _s=$1
  shift
  # shellcheck disable=SC2046 # one -u per name
  env $(for v in $VARS; do printf -- '-u %s ' "$v"; done) RDMA_ENV_SYSFS="$_s" RDMA_ENV_PROC="$_s/proc" \
    RDMA_ENV_FILE="$t/no-such-file" NETWORK_STATUS_FILE="$_s/network-status" RDMA_ENV_OUT="$_s/out" \
    RDMA_ENV_WAIT=0 "$@" sh "$envsh" sh -c 'env | grep -E "^(NCCL_|UCX_|RDMANET_)" | sort' 2>"$_s/stderr"
}
val() { echo "$1" | sed -n "s/^$2=//p"; } # OUTPUT KEY

# One rail: a VF (exclusive mode), device-info from the device plugin and rdmanet.
o="$t/one"
vf "$o" net1 mlx5_7 Ethernet
gid "$o/class/infiniband/mlx5_7" 0 fe80:0000:0000:0000:0000:0000:0000:0001 "IB/RoCE v1"
gid "$o/class/infiniband/mlx5_7" 3 0000:0000:0000:0000:0000:ffff:c0a8:6e11 "RoCE v2"
route "$o" eth0 0001F40A 00FFFFFF
route "$o" net1 006EA8C0 00FFFFFF
status "$o/network-status" "net1|192.168.110.17|mlx5_7|0000:3b:00.2"
r=$(run "$o") || bad "one rail: $(cat "$o/stderr")"
expect "one rail: its HCA" "$(val "$r" NCCL_IB_HCA)" "=mlx5_7:1"
expect "one rail: own device: NCCL_IB_ADDR_FAMILY, no index" "$(val "$r" NCCL_IB_ADDR_FAMILY)/$(val "$r" NCCL_IB_GID_INDEX)" "AF_INET/"
expect "one rail: NCCL_IB_ADDR_RANGE from the pod's route" "$(val "$r" NCCL_IB_ADDR_RANGE)" "192.168.110.0/24"
expect "one rail: the cluster network is no rail" "$(val "$r" NCCL_SOCKET_IFNAME)" "=net1"
expect "one rail: per-rail keys" "$(val "$r" RDMANET_RAILS) $(val "$r" RDMANET_RAIL0_RDMA_DEVICE) $(val "$r" RDMANET_RAIL0_GID_INDEX) $(val "$r" RDMANET_RAIL0_PCI) $(val "$r" RDMANET_RAIL0_ADDRESS) $(val "$r" RDMANET_RAIL0_NUMA_NODE)" \
  "1 mlx5_7 3 0000:3b:00.2 192.168.110.17 1"
expect "one rail: NCCL_CONF_FILE and UCX_CONFIG_DIR" "$(val "$r" NCCL_CONF_FILE) $(val "$r" UCX_CONFIG_DIR)" "$o/out/nccl.conf $o/out"
expect "nccl.conf: the NCCL lines" "$(cat "$o/out/nccl.conf" 2>/dev/null)" "NCCL_IB_HCA==mlx5_7:1
NCCL_SOCKET_IFNAME==net1
NCCL_IB_ADDR_FAMILY=AF_INET
NCCL_IB_ADDR_RANGE=192.168.110.0/24"
expect "ucx.conf: the UCX lines" "$(cat "$o/out/ucx.conf" 2>/dev/null)" "UCX_NET_DEVICES=mlx5_7:1"
# device-info names a device the pod does not see (renamed): the one under the VF instead.
status "$o/network-status" "net1|192.168.110.17|mlx5_99|0000:3b:00.2"
expect "device-info naming an unseen device: the VF's own" "$(val "$(run "$o")" NCCL_IB_HCA)" "=mlx5_7:1"

# Eight rails, one subnet each, listed out of name order in the annotation: its order rules.
e="$t/eight"
for k in 1 2 3 4 5 6 7 8; do
  vf "$e" "net$k" "mlx5_$k" Ethernet
  gid "$e/class/infiniband/mlx5_$k" 3 "0000:0000:0000:0000:0000:ffff:0a3c:$(printf %02x "$k")0a" "RoCE v2"
  route "$e" "net$k" "00$(printf %02X "$k")3C0A" 00FFFFFF
done
# shellcheck disable=SC2046 # the entries
status "$e/network-status" $(for k in 2 1 3 4 5 6 7 8; do echo "net$k|10.60.$k.10|mlx5_$k|0000:0$k:00.1"; done)
r=$(run "$e") || bad "eight rails: $(cat "$e/stderr")"
expect "eight rails: HCAs in the annotation's order" "$(val "$r" NCCL_IB_HCA)" "=mlx5_2:1,mlx5_1:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1"
expect "eight rails: interfaces in that order" "$(val "$r" NCCL_SOCKET_IFNAME)" "=net2,net1,net3,net4,net5,net6,net7,net8"
expect "eight rails: UCX_NET_DEVICES" "$(val "$r" UCX_NET_DEVICES)" "mlx5_2:1,mlx5_1:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1"
expect "eight rails: own devices, eight subnets: family, no range, no index" \
  "$(val "$r" NCCL_IB_ADDR_FAMILY)/$(val "$r" NCCL_IB_ADDR_RANGE)/$(val "$r" NCCL_IB_GID_INDEX)" "AF_INET//"
expect "eight rails: RDMANET_RAILS and rail 7" "$(val "$r" RDMANET_RAILS) $(val "$r" RDMANET_RAIL7_IFNAME) $(val "$r" RDMANET_RAIL7_RDMA_DEVICE)" "8 net8 mlx5_8"
r=$(RDMA_IFNAMES="net3 net1" run "$e")
expect "RDMA_IFNAMES picks and orders" "$(val "$r" NCCL_IB_HCA) $(val "$r" NCCL_SOCKET_IFNAME)" "=mlx5_3:1,mlx5_1:1 =net3,net1"

# A shared HCA (macvlan net1, no device of its own): every pod's GIDs in one table.
s="$t/shared"
netdev "$s" net1
hca "$s" mlx5_0 Ethernet
hca "$s" mlx5_1 Ethernet
gid "$s/class/infiniband/mlx5_0" 2 0000:0000:0000:0000:0000:ffff:c0a8:6411 "IB/RoCE v1"
gid "$s/class/infiniband/mlx5_0" 3 0000:0000:0000:0000:0000:ffff:c0a8:6411 "RoCE v2"
gid "$s/class/infiniband/mlx5_0" 5 0000:0000:0000:0000:0000:ffff:c0a8:6412 "RoCE v2"
gid "$s/class/infiniband/mlx5_1" 3 0000:0000:0000:0000:0000:ffff:0a00:0001 "RoCE v2"
route "$s" net1 0064A8C0 00FFFFFF
status "$s/network-status" "net1|192.168.100.18"
r=$(run "$s") || bad "shared HCA: $(cat "$s/stderr")"
expect "shared HCA: the HCA holding the pod's GID" "$(val "$r" NCCL_IB_HCA)" "=mlx5_0:1"
expect "shared HCA: the pod's own index as NCCL_IB_GID_INDEX, no family" "$(val "$r" NCCL_IB_GID_INDEX)/$(val "$r" NCCL_IB_ADDR_FAMILY)" "5/"
status "$s/network-status" "net1|192.168.100.17"
expect "shared HCA: the v2 GID, not v1" "$(val "$(run "$s")" NCCL_IB_GID_INDEX)" "3"
status "$s/network-status" "net1|192.168.100.99"
run "$s" >/dev/null && bad "an address without GID passes" ||
  { grep -q "no RDMA device for net1 (192.168.100.99)" "$s/stderr" && ok "fails naming the rail without GID" || bad "no GID: $(cat "$s/stderr")"; }

# Soft-RoCE in shared netns mode: every pod's rxe is in view with parent net1; ours holds
# our address.
x="$t/rxe"
netdev "$x" net1
for d in rxe0:0a38000a rxe1:0a38000b; do
  hca "$x" "${d%:*}" Ethernet
  echo net1 >"$x/class/infiniband/${d%:*}/parent"
  gid "$x/class/infiniband/${d%:*}" 1 "0000:0000:0000:0000:0000:ffff:$(echo "${d#*:}" | sed 's/\(....\)/\1:/; s/:$//')" "RoCE v2"
done
status "$x/network-status" "net1|10.56.0.11"
r=$(run "$x") || bad "soft-RoCE: $(cat "$x/stderr")"
expect "soft-RoCE: the pod's own rxe among others on net1, as its own device" \
  "$(val "$r" NCCL_IB_HCA) $(val "$r" NCCL_IB_ADDR_FAMILY) $(val "$r" NCCL_IB_GID_INDEX)" "=rxe1:1 AF_INET "

# An IPv6 rail: the GID is the address itself; link-local addresses are no rail's.
six="$t/v6"
vf "$six" net1 mlx5_3 Ethernet
gid "$six/class/infiniband/mlx5_3" 0 fe80:0000:0000:0000:0000:0000:0000:0001 "RoCE v2"
gid "$six/class/infiniband/mlx5_3" 5 fd00:0056:0000:0000:0000:0000:0000:0011 "RoCE v2"
status "$six/network-status" "net1|fe80::1,fd00:56::11"
r=$(run "$six") || bad "IPv6: $(cat "$six/stderr")"
expect "IPv6 rail: its v2 GID, AF_INET6" \
  "$(val "$r" RDMANET_RAIL0_GID_INDEX) $(val "$r" RDMANET_RAIL0_GID_INDEX_IPV6) $(val "$r" NCCL_IB_ADDR_FAMILY) $(val "$r" NCCL_IB_GID_INDEX)" "5 5 AF_INET6 "

# InfiniBand: the HCA only, no GID index, no family.
i="$t/ib"
vf "$i" net1 mlx5_9 InfiniBand
status "$i/network-status" "net1|192.168.130.2|mlx5_9|0000:5e:00.3"
r=$(run "$i") || bad "IB: $(cat "$i/stderr")"
expect "InfiniBand: HCA, no GID settings" "$(val "$r" NCCL_IB_HCA) [$(val "$r" NCCL_IB_GID_INDEX)$(val "$r" NCCL_IB_ADDR_FAMILY)]" "=mlx5_9:1 []"

# The user's settings win, in the environment; the files keep what was found.
r=$(run "$o" NCCL_IB_HCA==mlx5_5:1 NCCL_SOCKET_IFNAME=eth9 NCCL_CONF_FILE=/etc/my-nccl.conf)
expect "user env wins" "$(val "$r" NCCL_IB_HCA) $(val "$r" NCCL_SOCKET_IFNAME) $(val "$r" NCCL_CONF_FILE) $(val "$r" UCX_NET_DEVICES)" \
  "=mlx5_5:1 eth9 /etc/my-nccl.conf mlx5_7:1"

# The annotation in other shapes: compact, other key order, escapes.
printf '[{"name":"cbr0","interface":"eth0","ips":["10.244.1.5"],"default":true,"dns":{}},{"dns":{"nameservers":["1.1.1.1"]},"ips":["192.168.110.17"],"interface":"net1","name":"x\\"y\\u003c","device-info":{"pci":{"rdma-device":"mlx5_7","pci-address":"0000:3b:00.2"},"type":"pci","version":"1.1.0"}}]' >"$o/network-status"
expect "compact JSON, other key order, escapes" "$(val "$(run "$o")" NCCL_IB_HCA)" "=mlx5_7:1"

# Failures: each names what is missing or wrong, and nothing runs as code.
err=$(env RDMA_ENV_SYSFS="$o" RDMA_ENV_FILE="$t/no-such-file" NETWORK_STATUS_FILE="$t/no-such-status" sh "$envsh" true 2>&1) &&
  bad "passes without either file" ||
  { echo "$err" | grep -q "neither $t/no-such-file .* nor $t/no-such-status .*network-status" && ok "missing file: names both sources" || bad "missing: $err"; }
: >"$o/network-status"
run "$o" >/dev/null && bad "passes with an empty annotation" ||
  { grep -q "lists no secondary network" "$o/stderr" && ok "empty annotation (not written yet): fails after the wait" || bad "empty: $(cat "$o/stderr")"; }
status "$o/network-status"
run "$o" >/dev/null && bad "passes with the cluster network only" ||
  { grep -q "lists no secondary network" "$o/stderr" && ok "cluster network only: no rail" || bad "default only: $(cat "$o/stderr")"; }
printf '[{"name": "a", "interface": "net1", "ips": ["1.2.3.4"' >"$o/network-status"
run "$o" >/dev/null && bad "passes with a truncated annotation" ||
  { grep -q "network-status: " "$o/stderr" && ok "truncated JSON: says so" || bad "truncated: $(cat "$o/stderr")"; }
rm -f /tmp/rdmanet-rdma-env-pwned
status "$o/network-status" 'net1$(touch /tmp/rdmanet-rdma-env-pwned)|192.168.110.17'
run "$o" >/dev/null && bad "a hostile interface name passes" ||
  { grep -q "interface .* is not one" "$o/stderr" && ok "hostile interface name refused" || bad "hostile: $(cat "$o/stderr")"; }
status "$o/network-status" "net1|192.168.110.17|mlx5_7;reboot|0000:3b:00.2"
run "$o" >/dev/null && bad "a hostile rdma-device passes" ||
  { grep -q 'rdma-device "mlx5_7;reboot" is not one' "$o/stderr" && ok "hostile rdma-device refused" || bad "hostile rdma-device: $(cat "$o/stderr")"; }
[ ! -e /tmp/rdmanet-rdma-env-pwned ] && ok "no annotation value runs as code" || { bad "a value ran"; rm -f /tmp/rdmanet-rdma-env-pwned; }
status "$o/network-status" "net5|192.168.110.17"
run "$o" >/dev/null && bad "a rail the pod does not have passes" ||
  { grep -q "no interface net5 in the pod" "$o/stderr" && ok "names a listed interface the pod lacks" || bad "net5: $(cat "$o/stderr")"; }

# rdmanet's rdma.env for the pod: taken as it is; a variable the user set wins; a line that
# is no assignment of a name is ignored; nccl.conf and ucx.conf beside it are exported.
mkdir -p "$t/pod"
cat >"$t/pod/rdma.env" <<'ENV'
# rdmanet: this pod's RDMA rails (see rails.json)
NCCL_IB_HCA==mlx5_3:1,mlx5_4:1
NCCL_IB_ADDR_FAMILY=AF_INET
NCCL_IB_TC=106
NCCL_SOCKET_IFNAME==net1,net2
$(touch /tmp/rdmanet-rdma-env-pwned)=x
ENV
out=$(env -u NCCL_IB_HCA -u NCCL_IB_ADDR_FAMILY -u NCCL_IB_TC -u NCCL_CONF_FILE -u UCX_CONFIG_DIR NCCL_SOCKET_IFNAME=eth0 \
  RDMA_ENV_FILE="$t/pod/rdma.env" RDMA_ENV_SYSFS="$t/none" NETWORK_STATUS_FILE="$t/none" \
  sh "$envsh" sh -c 'echo "$NCCL_IB_HCA $NCCL_IB_ADDR_FAMILY $NCCL_IB_TC $NCCL_SOCKET_IFNAME ${NCCL_CONF_FILE:-none}"' 2>/dev/null)
expect "rdmanet's rdma.env, the user's setting first" "$out" "=mlx5_3:1,mlx5_4:1 AF_INET 106 eth0 none"
[ ! -e /tmp/rdmanet-rdma-env-pwned ] && ok "no line of the file runs as code" || { bad "a line ran"; rm -f /tmp/rdmanet-rdma-env-pwned; }
printf 'NCCL_IB_HCA==mlx5_3:1\n' >"$t/pod/nccl.conf"
printf 'UCX_NET_DEVICES=mlx5_3:1\n' >"$t/pod/ucx.conf"
out=$(env -u NCCL_CONF_FILE -u UCX_CONFIG_DIR RDMA_ENV_FILE="$t/pod/rdma.env" sh "$envsh" sh -c 'echo "$NCCL_CONF_FILE $UCX_CONFIG_DIR"' 2>/dev/null)
expect "rdma.env path: NCCL_CONF_FILE and UCX_CONFIG_DIR beside it" "$out" "$t/pod/nccl.conf $t/pod"
out=$(env UCX_CONFIG_DIR=/mine RDMA_ENV_FILE="$t/pod/rdma.env" sh "$envsh" sh -c 'echo "$UCX_CONFIG_DIR"' 2>/dev/null)
expect "rdma.env path: the user's UCX_CONFIG_DIR wins" "$out" "/mine"

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
