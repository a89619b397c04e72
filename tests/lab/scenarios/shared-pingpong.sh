#!/bin/sh
# lab-kernel: 7.3
# lab-cmdline:
# Shared netns mode (the default), driven through the CNI protocol: two pods
# (netns pod-a, pod-b) get the two ends of one veth pair from rdmanet with
# rdmanet-ipam and softRoce, as a runtime would call it. Establishes: each pod
# has its soft-RoCE device on net1; rdmanet reports the RoCE v2 GID index the
# pod itself sees; verbs (ibv_rc_pingpong) and rdma_cm (rping) traffic flows
# between the pods; roce.tos shows as the IP ToS of RoCE v2 packets on the
# wire; CHECK passes; DEL (twice) leaves no device, state or lease. Measures
# the pods' pingpong latency against soft-RoCE devices made by hand.
set -eu
. /lab/lib.sh

lab_fact kernel "$(uname -r)"
require netns-mode-shared sh -c 'rdma system show | grep -q "netns shared"'

show "two NIC ports on one wire (a veth pair) in the host: va <-> vb"
$IP link add va type veth peer name vb
$IP link set vb up # the far end up, as a cabled port's: pod-a's rail has carrier at once
$IP netns add pod-a
$IP netns add pod-b
rail_conf va '"roce": {"tos": 106, "mode": "v2"}' > /tmp/a.json
rail_conf vb '"roce": {"tos": 106, "mode": "v2"}' > /tmp/b.json
show "network config of pod-a:"
sed 's/^/DEMO|   /' /tmp/a.json

for pod in a b; do
    require "cni-add-$pod" sh -c ". /lab/lib.sh; cni ADD pod-$pod /tmp/$pod.json > /tmp/res-$pod.json"
    show "CNI ADD pod-$pod -> result:"
    sed 's/^/DEMO|   /' "/tmp/res-$pod.json"
done
ip_a=$(json_str address /tmp/res-a.json | cut -d/ -f1)
ip_b=$(json_str address /tmp/res-b.json | cut -d/ -f1)
dev_a=$(pod_rdma_dev pod-a)
dev_b=$(pod_rdma_dev pod-b)
check rdma-device-on-net1-a test -n "$dev_a"
check rdma-device-on-net1-b test -n "$dev_b"
for pod in a b; do
    show "inside pod-$pod: net1 and its RDMA device"
    nsx "pod-$pod" $IP -br addr show dev net1 | sed 's/^/DEMO|   /'
    nsx "pod-$pod" rdma link show | grep 'netdev net1' | sed 's/^/DEMO|   /'
done

# The GID index rdmanet reported is the one the pod sees (through uverbs).
gi_a=$(reported_gid_index "$dev_a")
gi_b=$(reported_gid_index "$dev_b")
seen_a=$(roce_v2_gid_index pod-a "$dev_a" "$ip_a")
seen_b=$(roce_v2_gid_index pod-b "$dev_b" "$ip_b")
check gid-reported-a sh -c "[ -n '$gi_a' ] && [ '$gi_a' = '$seen_a' ] && echo 'rdmanet: $gi_a, ibv_devinfo: $seen_a'"
check gid-reported-b sh -c "[ -n '$gi_b' ] && [ '$gi_b' = '$seen_b' ] && echo 'rdmanet: $gi_b, ibv_devinfo: $seen_b'"
show "rdmanet's report (its log):"
grep -h "RoCE v2 GID index\|created soft-RoCE\|attached" "$CNI_LOG" | sed 's/^/DEMO|   /'
show "pod-a's GID table, as pod-a sees it:"
nsx pod-a ibv_devinfo -v -d "$dev_a" | grep 'GID\[' | sed 's/^/DEMO|   /'

# Verbs RC traffic between the pods, with the reported GID indexes.
show "ibv_rc_pingpong: server in pod-a ($dev_a), client in pod-b ($dev_b)"
check ibv-rc-pingpong pingpong pod-a "$dev_a" "${gi_a:-1}" pod-b "$dev_b" "${gi_b:-1}" "$ip_a" 200
sed 's/^/DEMO|   /' /tmp/pp-client.log

# Baseline in the same boot: soft-RoCE devices made by hand on another veth
# pair in two more netns, the way the kernel facts were first established.
# Three rounds each, alternating, so a noisy moment hits both alike.
two_pods_on_veth ha hb
nsx a rdma link add rxea type rxe netdev ha
nsx b rdma link add rxeb type rxe netdev hb
wait_for 10 sh -c '[ -n "$(. /lab/lib.sh; roce_v2_gid_index a rxea 10.0.0.1)" ]' || true
wait_for 10 sh -c '[ -n "$(. /lab/lib.sh; roce_v2_gid_index b rxeb 10.0.0.2)" ]' || true
ga=$(roce_v2_gid_index a rxea 10.0.0.1)
gb=$(roce_v2_gid_index b rxeb 10.0.0.2)
usec() { sed -n 's/.* \([0-9.]*\) usec\/iter.*/\1/p' /tmp/pp-client.log; }
pod_runs="" hand_runs=""
for round in 1 2 3; do
    check "pingpong-rdmanet-round-$round" pingpong pod-a "$dev_a" "${gi_a:-1}" pod-b "$dev_b" "${gi_b:-1}" "$ip_a" 200
    [ "$LAB_LAST" = fail ] || pod_runs="$pod_runs $(usec)"
    check "pingpong-by-hand-round-$round" pingpong a rxea "${ga:-1}" b rxeb "${gb:-1}" 10.0.0.1 200
    [ "$LAB_LAST" = fail ] || hand_runs="$hand_runs $(usec)"
done
median() { echo "$@" | tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
pod_latency=$(median $pod_runs)
base_latency=$(median $hand_runs)
lab_fact pingpong_rdmanet_pods_usec "median ${pod_latency:-none} of [$pod_runs ] (200 iterations each, TCG)"
lab_fact pingpong_by_hand_usec "median ${base_latency:-none} of [$hand_runs ]"
if [ -n "$pod_latency" ] && [ -n "$base_latency" ]; then
    lab_fact pingpong_ratio_rdmanet_over_by_hand \
        "$(awk -v p="$pod_latency" -v b="$base_latency" 'BEGIN { printf "%.2f", p / b }')"
fi
nsx a rdma link del rxea
nsx b rdma link del rxeb
$IP netns del a
$IP netns del b

# rdma_cm traffic, and roce.tos on the wire: capture RoCE v2 (UDP 4791) on
# pod-b's net1 while rping runs. tos 106 = 0x6a (DSCP 26, ECN 2).
nsx pod-b timeout 40 tcpdump -Z root -l -n -v -i net1 -c 6 udp port 4791 > /tmp/tcpdump.log 2>&1 &
dump=$!
wait_for 10 grep -q 'listening on' /tmp/tcpdump.log || lab_fact tcpdump_start "$(cat /tmp/tcpdump.log)"

nsx pod-a timeout 60 rping -s -a "$ip_a" -C 10 -v > /tmp/rping-server.log 2>&1 &
srv=$!
rping_client() {
    for _i in 1 2 3 4 5 6 7 8 9 10; do
        nsx pod-b timeout 30 rping -c -a "$ip_a" -C 10 -v && return 0
        sleep 0.5
    done
    return 1
}
show "rping (rdma_cm) from pod-b to pod-a"
check rping rping_client
wait "$srv" || lab_result rping-server fail "$(cat /tmp/rping-server.log)"
wait "$dump" || true
# The ToS is on RoCE v2 packets in both directions (rping's QPs are rdma_cm's,
# so they take the device default; the connection's MADs may not). tcpdump -v
# prints the IP header line (with the tos) before the line with the addresses.
tos_on_wire() {
    awk -v a="$ip_a" -v b="$ip_b" '
        /proto UDP/ { tos = ($0 ~ /tos 0x6a/) }
        / > / && /\.4791:/ {
            dir = (index($0, a ".") < index($0, b ".")) ? "ab" : "ba"
            n[dir]++; if (tos) t[dir]++
        }
        END {
            printf "a->b %d of %d with tos 0x6a, b->a %d of %d\n", t["ab"], n["ab"], t["ba"], n["ba"]
            exit !(t["ab"] > 0 && t["ba"] > 0)
        }' /tmp/tcpdump.log || { echo 'capture:'; cat /tmp/tcpdump.log; return 1; }
}
check roce-tos-on-wire tos_on_wire
show "RoCE v2 packets captured on pod-b's net1:"
grep -A1 'tos' /tmp/tcpdump.log | head -n 4 | sed 's/^/DEMO|   /'

# CHECK as a runtime calls it, with the ADD's result as prevResult, for both pods.
for pod in a b; do
    check_conf "/tmp/$pod.json" "/tmp/res-$pod.json" > "/tmp/check-$pod.json"
    check "cni-check-$pod" cni CHECK "pod-$pod" "/tmp/check-$pod.json"
done

show "CNI DEL both pods (twice: DEL is idempotent)"
for pod in a b; do
    check "cni-del-$pod" cni DEL "pod-$pod" "/tmp/$pod.json"
    check "cni-del-again-$pod" cni DEL "pod-$pod" "/tmp/$pod.json"
done
check soft-roce-devices-deleted no_rdma_devices
check ports-back-in-host sh -c "$IP link show va && $IP link show vb"
check no-leftovers no_leftovers
show "after DEL: host RDMA devices: $(rdma dev show | wc -l); va, vb back in the host"
