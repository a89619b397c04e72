#!/bin/sh
# The demo: builds rdmanet, then gives two throwaway "pods" (network
# namespaces) their RDMA-rail interfaces through the real CNI protocol, shows
# the CNI results and the pods' view, pings across, and cleans up. A veth
# pair stands in for two RDMA NIC ports on one wire (this machine has no
# RDMA NIC); the plugins handle it exactly as they handle a VF netdev.
set -eu
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "tests/demo.sh: run as root" >&2; exit 1; }

tests/deps.sh all
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build rdmanet rdmanet-ipam

work=$(mktemp -d /tmp/rdmanet-demo.XXXXXX)
bin="$work/bin"
mkdir -p "$bin"
cp build/cni/plugin/rdmanet build/ipam/rdmanet-ipam "$bin/"
tag=$$
porta="rdmdemo${tag}a"
portb="rdmdemo${tag}b"

cleanup() {
  set +e
  for pod in a b; do ip netns del "rdmanet-demo-$tag-$pod" 2>/dev/null; done
  ip link del "$porta" 2>/dev/null
  ip link del "$portb" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "two NIC ports on one wire (veth stand-ins): $porta <-> $portb"
ip link add "$porta" type veth peer name "$portb"
ip -br link show "$porta"
ip -br link show "$portb"

conf() {  # conf DEVICE
  cat <<JSON
{
  "cniVersion": "1.1.0",
  "name": "rail-demo",
  "type": "rdmanet",
  "mode": "netdev",
  "device": "$1",
  "mtu": 1500,
  "stateDir": "$work/state",
  "ipam": {
    "type": "rdmanet-ipam",
    "dataDir": "$work/ipam",
    "ranges": [[{"subnet": "192.168.77.0/24", "rangeStart": "192.168.77.10"}]]
  }
}
JSON
}

cni() {  # cni COMMAND POD DEVICE
  conf "$3" | CNI_COMMAND=$1 CNI_CONTAINERID="demo-$tag-$2" CNI_NETNS="/run/netns/rdmanet-demo-$tag-$2" \
    CNI_IFNAME=net1 CNI_PATH="$bin" \
    CNI_ARGS="IgnoreUnknown=true;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=pod-$2" "$bin/rdmanet"
}

say "CNI VERSION"
CNI_COMMAND=VERSION "$bin/rdmanet" </dev/null

for pod in a b; do
  ip netns add "rdmanet-demo-$tag-$pod"
done

say "ADD pod-a <- $porta"
cni ADD a "$porta"
say "ADD pod-b <- $portb"
cni ADD b "$portb"

for pod in a b; do
  say "inside pod-$pod"
  ip -n "rdmanet-demo-$tag-$pod" -br addr show dev net1
done

addr_b=$(ip -n "rdmanet-demo-$tag-b" -4 -o addr show dev net1 | awk '{print $4}' | cut -d/ -f1)
say "pod-a pings pod-b ($addr_b) over its rail"
ip netns exec "rdmanet-demo-$tag-a" ping -c 3 -i 0.2 -W 2 "$addr_b"

say "CHECK pod-a"
cni CHECK a "$porta" && echo "CHECK ok"

say "DEL both pods (twice: DEL is idempotent)"
for pod in a b; do
  dev=$porta; [ $pod = b ] && dev=$portb
  cni DEL $pod "$dev"
  cni DEL $pod "$dev"
done

say "the ports are back in the host under their own names"
ip -br link show "$porta"
ip -br link show "$portb"
echo
echo "demo finished: 2 pods attached, pinged, detached"
