#!/bin/sh
# A real CNI client: podman (CNI backend, libcni inside) runs a container on a
# network whose conflist uses rdmanet with Debian's host-local. The container
# must see the interface and its address; after it exits, the device must be
# back in the host under its own name, with no state or lease left.
# Usage: podman_test.sh RDMANET_BINARY
set -eu
rdmanet=$1
[ "$(id -u)" -eq 0 ] || { echo "FAIL: needs root" >&2; exit 1; }
for tool in podman runc busybox; do
  command -v $tool >/dev/null || { echo "FAIL: $tool missing (tests/tools/deps.sh installs it)" >&2; exit 1; }
done

work=$(mktemp -d /tmp/rdmanet-podman.XXXXXX)
port="rdpm$$a"
peer="rdpm$$b"
net="rdmanet-podman-$$"
cleanup() {
  set +e
  ip link del "$port" 2>/dev/null
  ip link del "$peer" 2>/dev/null
  podman --root "$work/root" --runroot "$work/runroot" --storage-driver vfs rm -af >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

mkdir -p "$work/rootfs/bin" "$work/net.d" "$work/bin"
cp "$(command -v busybox)" "$work/rootfs/bin/"
for t in sh ip cat; do ln -s busybox "$work/rootfs/bin/$t"; done
tar -C "$work/rootfs" -cf "$work/rootfs.tar" .
ln -s "$rdmanet" "$work/bin/rdmanet"
ln -s /usr/lib/cni/host-local "$work/bin/host-local"
cat > "$work/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1000:1000"]
[network]
network_backend = "cni"
cni_plugin_dirs = ["$work/bin"]
network_config_dir = "$work/net.d"
[engine]
runtime = "runc"
CONF
cat > "$work/net.d/$net.conflist" <<CONF
{"cniVersion": "1.0.0", "name": "$net", "plugins": [
  {"type": "rdmanet", "device": "$port", "mtu": 1450, "stateDir": "$work/state",
   "ipam": {"type": "host-local", "dataDir": "$work/ipam", "subnet": "10.131.0.0/24"}}]}
CONF
ip link add "$port" type veth peer name "$peer"
ip link set "$peer" up # the wire's far end: the pod's end has carrier (ADD waits for it)
mac=$(cat "/sys/class/net/$port/address")

export CONTAINERS_CONF="$work/containers.conf"
pm() { podman --root "$work/root" --runroot "$work/runroot" --storage-driver vfs "$@"; }
pm import -q "$work/rootfs.tar" localhost/rdmanet-test >/dev/null
out=$(pm run --rm --network "$net" localhost/rdmanet-test sh -c 'ip addr show; cat /sys/class/net/eth0/mtu')
echo "$out"

fail=0
check() { if ! eval "$1"; then echo "FAIL: $2" >&2; fail=1; fi; }
check 'echo "$out" | grep -q "inet 10.131.0.2/24"' "container did not see its address"
check 'echo "$out" | grep -q "link/ether $mac"' "container did not get the device (MAC $mac)"
check 'echo "$out" | tail -1 | grep -qx 1450' "MTU 1450 not applied"
check 'ip link show dev "$port" >/dev/null 2>&1' "device $port not back in the host"
check '[ "$(cat /sys/class/net/$port/address)" = "$mac" ]' "device MAC not restored"
check '[ -z "$(find "$work/state" -name "*.json" 2>/dev/null)" ]' "attachment state left behind"
check '[ -z "$(ls "$work/ipam/$net" 2>/dev/null | grep "^10\.")" ]' "IPAM lease left behind"
[ $fail -eq 0 ] && echo "podman: container got $port as eth0 with 10.131.0.2/24; device back in host after exit"
exit $fail
