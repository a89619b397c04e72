#!/bin/sh
# shellcheck disable=SC2015 # ok() always succeeds, so A && ok || bad is if/else
# deploy/installer/node-prep.sh against a fake root (never this machine's
# /etc or kernel): --exclusive writes the modprobe.d option, --shared removes
# it, and the report names the mode, devices, netdevs and GIDs.
# Usage: deploy_node_prep_test.sh NODE_PREP_SH
set -eu
prep=$1
root=$(mktemp -d /tmp/rdmanet-node-prep.XXXXXX)
trap 'rm -rf "$root"' EXIT
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }

# A node in shared mode with one RoCE HCA whose port holds a pod's v2 GID.
mkdir -p "$root/sys/module/ib_core/parameters" "$root/sys/devices/pci0000:00/0000:3b:00.0/net/ens1f0np0" \
  "$root/sys/class/infiniband/mlx5_0/ports/1/gids" "$root/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types" \
  "$root/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs"
echo 1 >"$root/sys/module/ib_core/parameters/netns_mode"
ln -s "../../../devices/pci0000:00/0000:3b:00.0" "$root/sys/class/infiniband/mlx5_0/device"
p="$root/sys/class/infiniband/mlx5_0/ports/1"
echo ACTIVE >"$p/state"
echo Ethernet >"$p/link_layer"
echo 0000:0000:0000:0000:0000:ffff:c0a8:6411 >"$p/gids/3"
echo 0000:0000:0000:0000:0000:0000:0000:0000 >"$p/gids/4"
echo "RoCE v2" >"$p/gid_attrs/types/3"
echo net1 >"$p/gid_attrs/ndevs/3"

out=$(sh "$prep" --root "$root" 2>&1)
echo "$out" | grep -q "netns mode: shared (configured for next boot: shared)" && ok "reports shared mode" || bad "reports shared mode: $out"
echo "$out" | grep -q "rdma device mlx5_0 pci 0000:3b:00.0 netdevs: ens1f0np0" && ok "reports device, PCI address and netdev" || bad "device line: $out"
echo "$out" | grep -q "gid 3 0000:0000:0000:0000:0000:ffff:c0a8:6411 RoCE v2 ndev net1" && ok "reports GIDs in use" || bad "gid line: $out"
echo "$out" | grep -q "gid 4" && bad "reports empty GIDs" || ok "skips empty GIDs"
[ ! -e "$root/etc/modprobe.d/rdmanet-netns.conf" ] && ok "report mode changes nothing" || bad "report mode wrote a file"

out=$(sh "$prep" --root "$root" --exclusive 2>&1)
grep -qx "options ib_core netns_mode=0" "$root/etc/modprobe.d/rdmanet-netns.conf" && ok "--exclusive writes the modprobe.d option" || bad "--exclusive: $(cat "$root/etc/modprobe.d/rdmanet-netns.conf" 2>&1)"
echo "$out" | grep -q "configured for next boot: exclusive" && ok "reports the pending mode" || bad "pending mode: $out"
[ "$(find "$root/etc/modprobe.d" -type f | wc -l)" -eq 1 ] && ok "no temporaries left" || bad "temporaries left in modprobe.d"
sh "$prep" --root "$root" --exclusive >/dev/null 2>&1 && ok "--exclusive is idempotent" || bad "second --exclusive failed"

echo 0 >"$root/sys/module/ib_core/parameters/netns_mode"
sh "$prep" --root "$root" 2>&1 | grep -q "netns mode: exclusive" && ok "reports exclusive mode" || bad "exclusive mode not reported"
sh "$prep" --root "$root" --shared >/dev/null 2>&1
[ ! -e "$root/etc/modprobe.d/rdmanet-netns.conf" ] && ok "--shared removes the option" || bad "--shared left the option"

rm -rf "$root/sys/module/ib_core" "$root/sys/class/infiniband"
out=$(sh "$prep" --root "$root" 2>&1) && ok "exits 0 without ib_core" || bad "fails without ib_core"
echo "$out" | grep -q "ib_core not loaded" && ok "says ib_core is not loaded" || bad "no-ib_core message: $out"
sh "$prep" --bogus >/dev/null 2>&1 && bad "accepts an unknown option" || ok "rejects an unknown option"

# --live switches through the image's rdmanet (RDMA netlink; this machine has no RDMA, so
# a stand-in binary records the call and answers as the kernel would).
mkdir -p "$root/sys/module/ib_core/parameters"
echo 1 >"$root/sys/module/ib_core/parameters/netns_mode"
fake="$root/rdmanet"
printf '#!/bin/sh\necho "$*" >>"%s/calls"\n[ "$#" -eq 1 ] && { echo shared; exit 0; }\n[ -e "%s/busy" ] && { echo "set RDMA netns mode: Device or resource busy" >&2; exit 1; }\necho "$2"\n' "$root" "$root" >"$fake"
chmod +x "$fake"
out=$(RDMANET=$fake sh "$prep" --root "$root" --exclusive --live 2>&1)
grep -qx "rdma-netns-mode exclusive" "$root/calls" && ok "--live asks rdmanet rdma-netns-mode exclusive" || bad "--live calls: $(cat "$root/calls" 2>&1)"
echo "$out" | grep -q "switched to exclusive netns mode now" && ok "--live reports the switch" || bad "--live: $out"
echo "$out" | grep -q "rdma netns mode (netlink): shared" && ok "reports the kernel's mode over netlink" || bad "netlink mode: $out"
touch "$root/busy"
out=$(RDMANET=$fake sh "$prep" --root "$root" --exclusive --live 2>&1) && ok "a refused live switch still exits 0" || bad "refused switch failed node-prep"
echo "$out" | grep -q "live switch to exclusive refused (set RDMA netns mode: Device or resource busy" && ok "names the kernel's refusal" || bad "refusal: $out"
out=$(RDMANET=/nonexistent sh "$prep" --root "$root" --exclusive --live 2>&1)
echo "$out" | grep -q "no rdmanet binary at /nonexistent" && ok "says when the binary is missing" || bad "missing binary: $out"

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
