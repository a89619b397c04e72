#!/bin/sh
# lab-kernel: 7.3
# lab-cmdline: ib_core.netns_mode=0
# Exclusive netns mode set the way operators do it (ib_core netns_mode=0 at
# module load). Establishes, first for the kernel alone: an RDMA device moves
# into a netns with RDMA_NLDEV_CMD_SET (rdma dev set DEV netns NS), is then
# visible only there and comes back to the init netns when that netns is
# deleted. Then through the CNI protocol: rdmanet with rdmaIsolation
# "required" and softRoce gives each of two pods a soft-RoCE device moved into
# the pod's netns, visible only there; the reported GID index works for
# ibv_rc_pingpong between the pods; DEL deletes the device; a pod netns
# deleted without DEL leaves nothing stuck and DEL still succeeds after it; a
# software RDMA device on a host netdev is refused before anything changes.
set -eu
. /lab/lib.sh

lab_fact kernel "$(uname -r)"
require netns-mode-exclusive sh -c 'rdma system show | grep -q "netns exclusive"'
lab_fact netns_mode "$(rdma system show | head -n1)"

# --- move, visibility, return on netns deletion ------------------------------
$IP link add vt0 type veth peer name vt1
$IP link set vt0 up
$IP link set vt1 up
require rxe-add-init rdma link add rxet type rxe netdev vt0
$IP netns add t
require dev-set-netns rdma dev set rxet netns t
check gone-from-init rdma_devices_absent rxet
check visible-in-netns nsx t rdma dev show rxet
# The verbs view from inside the netns too (what a pod's NCCL would open).
check uverbs-in-netns sh -c "$IP netns exec t ibv_devices | grep -q rxet"
$IP netns del t
# Netns teardown is asynchronous (cleanup_net workqueue): poll.
t0=$(cut -d' ' -f1 /proc/uptime)
check returns-on-netns-delete wait_for 20 rdma dev show rxet
lab_fact return_after_netns_del_s "$(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { print b - a }')"
rdma link del rxet
$IP link del vt0

# --- two pods through rdmanet, devices moved in ---------------------------------
$IP link add va type veth peer name vb
$IP link set vb up # the wire's far end: pod-a's rail has carrier (ADD waits for it)
$IP netns add pod-a
$IP netns add pod-b
rail_conf va '"rdmaIsolation": "required"' > /tmp/a.json
rail_conf vb '"rdmaIsolation": "required"' > /tmp/b.json
for pod in a b; do
    require "cni-add-$pod" sh -c ". /lab/lib.sh; cni ADD pod-$pod /tmp/$pod.json > /tmp/res-$pod.json"
done
ip_a=$(json_str address /tmp/res-a.json | cut -d/ -f1)
dev_a=$(pod_rdma_dev pod-a)
dev_b=$(pod_rdma_dev pod-b)
check rdma-device-on-net1 sh -c "[ -n '$dev_a' ] && [ -n '$dev_b' ] && echo '$dev_a $dev_b'"
# sees_only POD DEV: `rdma dev show` in POD works and lists DEV alone.
sees_only() {
    _d=$(nsx "$1" rdma dev show) || return 1
    same "$1's RDMA devices" "$2" "$(echo "$_d" | awk '{ sub(/:$/, "", $2); print $2 }' | tr '\n' ' ' | sed 's/ $//')"
}
check isolated-a-sees-only-own sees_only pod-a "${dev_a:-none}"
check isolated-b-sees-only-own sees_only pod-b "${dev_b:-none}"
check isolated-host-sees-none no_rdma_devices
check state-records-move grep -q '"step": *"rdma-move"' "$CNI_STATE/rail0/ctr-pod-a.6e657431.json"
gi_a=$(reported_gid_index "$dev_a")
gi_b=$(reported_gid_index "$dev_b")
seen_a=$(roce_v2_gid_index pod-a "$dev_a" "$ip_a")
check gid-reported sh -c "[ -n '$gi_a' ] && [ '$gi_a' = '$seen_a' ] && echo 'rdmanet: $gi_a, ibv_devinfo: $seen_a'"
check ibv-rc-pingpong pingpong pod-a "$dev_a" "${gi_a:-1}" pod-b "$dev_b" "${gi_b:-1}" "$ip_a" 200
[ "$LAB_LAST" = fail ] || lab_fact pingpong_latency "$(grep 'usec/iter' /tmp/pp-client.log)"
check_conf /tmp/a.json /tmp/res-a.json > /tmp/check-a.json
check cni-check-a cni CHECK pod-a /tmp/check-a.json

check cni-del-a cni DEL pod-a /tmp/a.json
# DEL brings the device home (the path a hardware device takes), then deletes it.
check device-a-moved-home-first grep "moved RDMA device $dev_a .* to netns /proc/thread-self/ns/net" "$CNI_LOG"
check device-a-deleted sh -c ". /lab/lib.sh; rdma_devices_absent '$dev_a' && nsx pod-a sh -c '. /lab/lib.sh; rdma_devices_absent $dev_a'"
check port-a-back-in-host $IP link show va
check cni-del-again-a cni DEL pod-a /tmp/a.json

# pod-b's netns goes away without DEL (a crashed runtime): its veth end dies
# with it (and takes va along), the soft-RoCE device with its netdev.
$IP netns del pod-b
check nothing-stuck-after-netns-del wait_for 20 no_rdma_devices
check cni-del-b-after-netns-gone cni DEL pod-b /tmp/b.json
check no-leftovers no_leftovers

# A software RDMA device bound to a host netdev dies when that netdev moves:
# rdmanet refuses it (required) before changing anything.
$IP link add vc type veth peer name vd
rdma link add rxehost type rxe netdev vc
$IP netns add pod-c
rail_conf vc '"rdmaIsolation": "required"' | sed 's/"softRoce": true/"softRoce": false/' > /tmp/c.json
if cni ADD pod-c /tmp/c.json > /tmp/res-c.json; then
    lab_result software-device-refused fail "ADD succeeded: $(cat /tmp/res-c.json)"
else
    msg=$(json_str msg /tmp/res-c.json)
    check software-device-refused sh -c "[ '$(json_num code /tmp/res-c.json)' = 105 ] && grep -q rxehost /tmp/res-c.json && echo \"\$1\"" - "$msg"
fi
check software-device-untouched sh -c "$IP link show vc >/dev/null && rdma dev show rxehost"
check no-leftovers-after-refusal no_leftovers
rdma link del rxehost
$IP link del vc
$IP netns del pod-a
$IP netns del pod-c
