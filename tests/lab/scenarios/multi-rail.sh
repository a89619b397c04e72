#!/bin/sh
# lab-kernel: 7.3
# lab-cmdline:
# Multi-rail pods: two pods with eight soft-RoCE rails each, as on 8-GPU nodes (net1..net8
# over eight veth pairs, one NAD per rail: seven IPv4 subnets and one IPv6), attached through the CNI
# protocol the way Multus does it, with the pods' K8S_POD_UID. Establishes: rdmanet's rails
# file for each pod lists the four rails in order with each rail's RDMA device and RoCE v2
# GID index, equal to what the pod itself sees; ibv_rc_pingpong runs on every rail with the
# device and GID index the env file gives (the IPv6 rail with its IPv6 GID); each rail's
# traffic leaves by its own interface; every rail's roce.tos is the pod's NCCL_IB_TC (and
# UCX_IB_TRAFFIC_CLASS, in nccl.conf and ucx.conf next to rdma.env), and RDMA writes sent
# with the file's class (ib_write_bw --tclass, as NCCL applies NCCL_IB_TC) carry it as the
# IP ToS on the wire; after the pod flaps a rail and adds its address again behind another
# one, the address's RoCE v2 GID index moves and one node-agent round rewrites the pod's
# files with the new index, which pingpong then runs with; DEL of one rail takes its entry
# out, the last DEL the pod's directory.
set -eu
. /lab/lib.sh
export CNI_STATE=/run/rdmanet-state
PODS=/run/rdmanet/pods

lab_fact kernel "$(uname -r)"
RAILS="0 1 2 3 4 5 6 7"
V6=7  # the IPv6 rail
rail_net() { # K POD_SIDE -> a rail config: IPv4 rails, one IPv6 rail
    if [ "$1" -eq "$V6" ]; then range='{"subnet": "fd00:60:7::/64", "rangeStart": "fd00:60:7::10"}'
    else range="{\"subnet\": \"10.60.$1.0/24\", \"rangeStart\": \"10.60.$1.10\"}"; fi
    cat <<JSON
{"cniVersion": "1.1.0", "name": "rail$1", "type": "rdmanet", "device": "$2",
 "softRoce": true, "gidTimeout": 20, "stateDir": "$CNI_STATE", "podInfoDir": "$PODS",
 "roce": {"tos": 106},
 "logFile": "$CNI_LOG", "logLevel": "info",
 "ipam": {"type": "rdmanet-ipam", "dataDir": "$CNI_IPAM", "ranges": [[$range]]}}
JSON
}
$IP netns add pod-a
$IP netns add pod-b
for k in $RAILS; do
    $IP link add "ra$k" type veth peer name "rb$k"
    $IP link set "rb$k" up # the wire's far end: pod-a's rail has carrier (ADD waits for it)
    rail_net "$k" "ra$k" > "/tmp/a$k.json"
    rail_net "$k" "rb$k" > "/tmp/b$k.json"
done
# Multus attaches a pod's networks one after another, in annotation order.
for side in a b; do
    for k in $RAILS; do
        POD_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=trainer-$side;K8S_POD_UID=uid-$side"
        require "add-pod-$side-rail$k" sh -c ". /lab/lib.sh; POD_ARGS='$POD_ARGS' cni ADD pod-$side /tmp/$side$k.json net$((k + 1)) > /tmp/res-$side$k.json"
    done
done
POD_ARGS=""
show "pod-a's rdma.env, as rdmanet wrote it for the pod:"
sed 's/^/DEMO|   /' "$PODS/uid-a/rdma.env"
envval() { sed -n "s/^$2=//p" "$PODS/uid-$1/rdma.env"; }
check rails-file-lists-eight sh -c "[ \"\$(sed -n 's/^RDMANET_RAILS=//p' $PODS/uid-a/rdma.env)\" = 8 ] &&
    [ \"\$(sed -n 's/^NCCL_SOCKET_IFNAME=//p' $PODS/uid-a/rdma.env)\" = '=net1,net2,net3,net4,net5,net6,net7,net8' ] && echo 8 rails"

# rx_counts: packets received so far on pod-b's net1..net8.
rx_counts() {
    for k in $RAILS; do nsx pod-b cat "/sys/class/net/net$((k + 1))/statistics/rx_packets"; done | tr '\n' ' '
}
own_interface() { # K BEFORE AFTER
    set -- "$1" $2 $3
    k=$1; shift
    i=0
    while [ $i -lt 8 ]; do
        eval "b=\${$((i + 1))} a=\${$((i + 9))}"
        d=$((a - b))
        if [ $i -eq "$k" ]; then [ "$d" -ge 40 ] || { echo "net$((i + 1)) got only $d packets"; return 1; }
        else [ "$d" -lt 10 ] || { echo "net$((i + 1)) got $d packets of rail $k's traffic"; return 1; }; fi
        i=$((i + 1))
    done
    echo "only net$((k + 1)) carried it"
}

# Each rail: device and GID index from the env file; the same index the pod sees for its
# address; pingpong with them.
seen_all=""
for k in $RAILS; do
    i=$k
    dev_a=$(envval a "RDMANET_RAIL${i}_RDMA_DEVICE")
    dev_b=$(envval b "RDMANET_RAIL${i}_RDMA_DEVICE")
    if [ "$k" -eq "$V6" ]; then
        gi_a=$(envval a "RDMANET_RAIL${i}_GID_INDEX_IPV6")
        gi_b=$(envval b "RDMANET_RAIL${i}_GID_INDEX_IPV6")
        addr_a=$(envval a "RDMANET_RAIL${i}_ADDRESS_IPV6")
        seen=$(nsx pod-a ibv_devinfo -v -d "$dev_a" 2>/dev/null | awk -v want="$addr_a," '/GID\[/ && index($0, want) && /RoCE v2/ {
            sub(/.*GID\[ */, ""); sub(/\].*/, ""); print; exit }')
    else
        gi_a=$(envval a "RDMANET_RAIL${i}_GID_INDEX")
        gi_b=$(envval b "RDMANET_RAIL${i}_GID_INDEX")
        addr_a=$(envval a "RDMANET_RAIL${i}_ADDRESS")
        seen=$(roce_v2_gid_index pod-a "$dev_a" "$addr_a")
    fi
    seen_all="$seen_all ${seen:-none}"
    check "rail$k-env-matches-pod" sh -c "[ -n '$dev_a' ] && [ -n '$gi_a' ] && [ '$gi_a' = '$seen' ] &&
        echo 'net$((k + 1)): $dev_a GID index $gi_a ($addr_a), the pod sees $seen'"
    before=$(rx_counts)
    check "rail$k-pingpong" pingpong pod-a "$dev_a" "${gi_a:-1}" pod-b "$dev_b" "${gi_b:-1}" "$addr_a" 20
    lab_fact "rail${k}_pingpong" "$(sed -n 's/.* \([0-9.]*\) usec\/iter.*/\1 usec\/iter/p' /tmp/pp-client.log)"
    # The rail's RDMA traffic (20 round trips) crossed its own interface; the others saw
    # next to nothing meanwhile.
    check "rail$k-own-interface" own_interface "$k" "$before" "$(rx_counts)"
done

# One traffic class, from the NADs' roce.tos, for NCCL and UCX, in rdma.env and in the files
# NCCL_CONF_FILE and UCX_CONFIG_DIR point them at.
check traffic-class-in-files sh -c "grep -qx NCCL_IB_TC=106 $PODS/uid-a/rdma.env &&
    grep -qx NCCL_IB_TC=106 $PODS/uid-a/nccl.conf && grep -qx UCX_IB_TRAFFIC_CLASS=106 $PODS/uid-a/ucx.conf &&
    grep -qx RDMANET_RAIL3_TC=106 $PODS/uid-a/rdma.env && ! grep -q '^UCX_' $PODS/uid-a/nccl.conf &&
    echo 'NCCL_IB_TC=106 UCX_IB_TRAFFIC_CLASS=106'"
# Seven IPv4 rails and one IPv6 rail have no address family in common: never a family half
# the rails lack (NCCL finds no GID of it there), the common index when there is one: the
# index at which the pod sees every rail's GID, if they are all at one, else none.
# shellcheck disable=SC2086 # $seen_all: one word per rail
common_index=$(echo $seen_all | awk '{ for (i = 2; i <= NF; i++) if ($i != $1) exit; if (NF == 8 && $1 != "none") print $1 }')
lab_fact gid_indexes_the_pod_sees "$seen_all (common: ${common_index:-none})"
gid_index_is() {
    ! grep -q '^NCCL_IB_ADDR_FAMILY=' "$PODS/uid-a/rdma.env" || { echo "a family: $(grep '^NCCL_IB_ADDR_FAMILY=' "$PODS/uid-a/rdma.env")"; return 1; }
    _got=$(sed -n 's/^NCCL_IB_GID_INDEX=//p' "$PODS/uid-a/rdma.env")
    same "NCCL_IB_GID_INDEX (the pod sees the rails' GIDs at$seen_all)" "$common_index" "$_got"
}
check no-family-for-mixed-rails gid_index_is

# RDMA writes with the file's class: rxe sends non-rdma_cm QPs with traffic class 0 unless
# told, so tos 0x6a (DSCP 26, ECN 2) on the wire is the file's NCCL_IB_TC.
tc_a=$(sed -n 's/^NCCL_IB_TC=//p' "$PODS/uid-a/rdma.env")
dev_a=$(envval a RDMANET_RAIL0_RDMA_DEVICE) gi_a=$(envval a RDMANET_RAIL0_GID_INDEX)
dev_b=$(envval b RDMANET_RAIL0_RDMA_DEVICE) gi_b=$(envval b RDMANET_RAIL0_GID_INDEX)
addr_b=$(envval b RDMANET_RAIL0_ADDRESS)
nsx pod-a timeout 40 tcpdump -Z root -l -n -v -Q out -i net1 -c 20 udp port 4791 > /tmp/tc.log 2>&1 &
tcpdump_pid=$!
wait_for 10 grep -q 'listening on' /tmp/tc.log || true
nsx pod-b timeout 60 ib_write_bw -d "$dev_b" -x "$gi_b" --tclass="${tc_a:-0}" -n 50 -s 4096 > /tmp/bw-server.log 2>&1 &
bw_srv=$!
wait_for 30 sh -c "$IP netns exec pod-b cat /proc/net/tcp | awk '\$2 ~ /:4853\$/ && \$4 == \"0A\" { f = 1 } END { exit !f }'" || true
check write-bw-with-file-class nsx pod-a timeout 60 ib_write_bw -d "$dev_a" -x "$gi_a" --tclass="${tc_a:-0}" -n 50 -s 4096 "$addr_b"
rc=0; wait "$bw_srv" || rc=$?
check write-bw-server-done sh -c "[ $rc -eq 0 ] && echo 'server rc 0' || { echo 'server rc $rc:'; cat /tmp/bw-server.log; exit 1; }"
wait "$tcpdump_pid" || true
tos_of_writes() {
    [ -n "$tc_a" ] && [ "$tc_a" -ne 0 ] || { echo "no traffic class in pod-a's files (NCCL_IB_TC=$tc_a)"; return 1; }
    all_packets_with_tos /tmp/tc.log "$tc_a" 1 "from pod-a, NCCL_IB_TC=$tc_a"
}
check traffic-class-on-wire tos_of_writes

# The pod flaps net1 and adds its address again behind another one: the address's RoCE v2
# GID moves to another index. One node-agent round rewrites the pod's files.
addr_a=$(envval a RDMANET_RAIL0_ADDRESS)
old_index=$(envval a RDMANET_RAIL0_GID_INDEX)
readd_behind pod-a net1 "$dev_a" "$addr_a" 10.60.0.250 24 flap
new_index=$(roce_v2_gid_index pod-a "$dev_a" "$addr_a")
lab_fact gid_index_moved "$addr_a: $old_index -> ${new_index:-none}"
check gid-index-moved sh -c "[ -n '$new_index' ] && [ '$new_index' != '$old_index' ] && echo '$old_index -> $new_index'"
check gid-file-stale-before-round sh -c "[ \"\$(sed -n 's/^RDMANET_RAIL0_GID_INDEX=//p' $PODS/uid-a/rdma.env)\" = '$old_index' ] && echo 'still $old_index'"
rc=0; agent_round /tmp/agent.log || rc=$?
check agent-round-rewrites-gid-index sh -c "[ $rc -eq 0 ] && [ \"\$(sed -n 's/^RDMANET_RAIL0_GID_INDEX=//p' $PODS/uid-a/rdma.env)\" = '$new_index' ] &&
    grep -q 'GID index of pod default/trainer-a' /tmp/agent.log && echo 'rc 0, rdma.env: $new_index' || { cat /tmp/agent.log; echo 'node-agent --once exited $rc'; exit 1; }"
check pingpong-with-rewritten-index pingpong pod-b "$dev_b" "$gi_b" pod-a "$dev_a" "$(envval a RDMANET_RAIL0_GID_INDEX)" "$addr_b" 20
# A second round, with nothing moved since: it succeeds and leaves the pod's files as they are.
pod_files() { cat "$PODS/uid-a/rdma.env" "$PODS/uid-a/nccl.conf" "$PODS/uid-a/ucx.conf"; }
second_round() {
    _before=$(pod_files) || return 1
    agent_round /tmp/agent2.log || { _rc=$?; cat /tmp/agent2.log; echo "node-agent --once exited $_rc"; return 1; }
    ! grep 'GID index of' /tmp/agent2.log || { echo "the round rewrote a file"; return 1; }
    [ "$(pod_files)" = "$_before" ] || { echo "the pod's files changed: $(pod_files)"; return 1; }
    echo "rc 0, nothing rewritten, the pod's files as they were"
}
check second-round-changes-nothing second_round

# DEL of rail 2 (net3) of pod-a: its entry goes, the others stay.
require del-rail2 cni DEL pod-a /tmp/a2.json net3
check rails-file-after-del sh -c "[ \"\$(sed -n 's/^NCCL_SOCKET_IFNAME=//p' $PODS/uid-a/rdma.env)\" = '=net1,net2,net4,net5,net6,net7,net8' ] && echo net3 gone"
for side in a b; do
    for k in $RAILS; do
        [ "$side$k" = a2 ] || check "del-pod-$side-rail$k" cni DEL "pod-$side" "/tmp/$side$k.json" "net$((k + 1))"
    done
done
check pod-directories-gone sh -c "[ -z \"\$(ls $PODS)\" ] && echo empty"
check nothing-left no_leftovers
check no-rxe-left no_rdma_links
