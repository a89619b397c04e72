#!/bin/sh
# lab-kernel: 7.3
# lab-cmdline: ib_core.netns_mode=0
# Without hostPath (Pod Security "baseline"): the facts reach the pod through the downward
# API. Two pods with two soft-RoCE rails each, attached through the CNI protocol with the
# pods' K8S_POD_UID in exclusive netns mode (each pod's sysfs shows only its own RDMA
# devices). The k8s.v1.cni.cncf.io/network-status annotation is composed from the CNI results
# exactly as Multus composes it (the cluster network first with "default": true, then per
# network its name, interface, ips, mac, dns and device-info when the device-info file was
# written; Go's json.MarshalIndent layout). Inside each pod's netns, with its own sysfs and
# with rdmanet's podInfoDir hidden, deploy/workloads/common/rdma-env.sh gets only that file.
# Establishes: it does not see rdma.env; it selects the same RDMA devices, interfaces, per-rail
# GID indexes and addresses as rdmanet's own rdma.env for that pod; own devices give
# NCCL_IB_ADDR_FAMILY and no NCCL_IB_GID_INDEX; NCCL_CONF_FILE names the nccl.conf it wrote;
# ibv_rc_pingpong on every rail with the device and GID index the script chose; the node
# agent, reading GID tables through the pods' netns, rewrites nothing while nothing moved and
# follows a GID index the pod moved within one round.
# Needs run.sh --add deploy/workloads/common/rdma-env.sh:/opt/rdmanet/rdma-env.sh.
set -eu
. /lab/lib.sh
export CNI_STATE=/run/rdmanet-state
PODS=/run/rdmanet/pods
ENVSH=/opt/rdmanet/rdma-env.sh

lab_fact kernel "$(uname -r)"
require netns-mode-exclusive sh -c 'rdma system show | grep -q "netns exclusive"'
require rdma-env-sh-present test -r "$ENVSH"
RAILS="0 1"
rail_net() { # K PORT SIDE
    cat <<JSON
{"cniVersion": "1.0.0", "name": "rail$1", "type": "rdmanet", "device": "$2",
 "softRoce": true, "rdmaIsolation": "required", "gidTimeout": 20,
 "stateDir": "$CNI_STATE", "podInfoDir": "$PODS", "logFile": "$CNI_LOG", "logLevel": "info",
 "runtimeConfig": {"CNIDeviceInfoFile": "/run/devinfo/$3-rail$1.json"},
 "ipam": {"type": "rdmanet-ipam", "dataDir": "$CNI_IPAM",
          "ranges": [[{"subnet": "10.61.$1.0/24", "rangeStart": "10.61.$1.10"}]]}}
JSON
}
$IP netns add pod-a
$IP netns add pod-b
for k in $RAILS; do
    $IP link add "ra$k" type veth peer name "rb$k"
    $IP link set "rb$k" up # the wire's far end: pod-a's rail has carrier (ADD waits for it)
    rail_net "$k" "ra$k" a > "/tmp/a$k.json"
    rail_net "$k" "rb$k" b > "/tmp/b$k.json"
done
for side in a b; do
    for k in $RAILS; do
        POD_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=trainer-$side;K8S_POD_UID=uid-$side"
        require "add-pod-$side-rail$k" sh -c ". /lab/lib.sh; POD_ARGS='$POD_ARGS' cni ADD pod-$side /tmp/$side$k.json net$((k + 1)) > /tmp/res-$side$k.json"
    done
done
POD_ARGS=""

# network_status SIDE: the annotation Multus writes for the pod from its delegates' results
# (types.NetworkStatus: name, interface, ips, mac, default, dns, device-info), indented by
# json.MarshalIndent(statuses, "", "    "). The cluster network comes first.
entry() { # RESULT NAME DEVINFO: one secondary network's entry, as Multus makes it
    _if=$(grep -o '{[^{}]*"sandbox":[^{}]*}' "$1" | head -n1)
    _name=$(echo "$_if" | sed -n 's/.*"name":"\([^"]*\)".*/\1/p')
    _mac=$(echo "$_if" | sed -n 's/.*"mac":"\([^"]*\)".*/\1/p')
    _ips=$(grep -o '"address":"[^"/]*' "$1" | sed 's/.*"//' | awk '{ printf "%s            \"%s\"", (NR > 1 ? ",\n" : ""), $0 }')
    printf ',\n    {\n        "name": "default/%s",\n        "interface": "%s",\n        "ips": [\n%s\n        ],\n' "$2" "$_name" "$_ips"
    printf '        "mac": "%s",\n        "dns": {}' "$_mac"
    if [ -s "$3" ]; then # device-info, re-indented as MarshalIndent nests it
        printf ',\n        "device-info": '
        tr -d '\n' < "$3" | sed 's/^ *//'
    fi
    printf '\n    }'
}
network_status() {
    printf '[\n    {\n        "name": "k8s-pod-network",\n        "interface": "eth0",\n        "ips": [\n'
    printf '            "10.244.0.%s"\n        ],\n        "mac": "0a:58:0a:f4:00:0%s",\n        "default": true,\n        "dns": {}\n    }' "$2" "$2"
    for k in $RAILS; do entry "/tmp/res-$1$k.json" "rail$k" "/run/devinfo/$1-rail$k.json"; done
    printf '\n]\n'
}
network_status a 5 > /tmp/status-a
network_status b 6 > /tmp/status-b
lab_fact device_info_written "$(ls /run/devinfo 2>/dev/null | wc -l) files (soft-RoCE on veth has no PCI address)"
show "pod-a's network-status annotation, as Multus would write it:"
sed 's/^/DEMO|   /' /tmp/status-a
check status-lists-rails sh -c "grep -c '\"interface\": \"net[12]\"' /tmp/status-a | grep -qx 2 && echo 'net1 and net2'"

# in_pod SIDE CMD...: CMD in the pod's netns (ip netns exec: its own mount namespace and a
# sysfs of the pod's netns, which in exclusive mode lists only the pod's RDMA devices) with
# rdmanet's podInfoDir hidden, as in a pod without the hostPath volume.
in_pod() {
    _side=$1; shift
    nsx "pod-$_side" sh -c 'mount -t tmpfs none /run/rdmanet && exec "$@"' sh "$@"
}
for side in a b; do
    check "pod-$side-no-podinfo" in_pod "$side" sh -c "[ ! -e $PODS/uid-$side/rdma.env ] && [ ! -e /run/rdmanet/pod/rdma.env ] && echo 'rdma.env not visible'"
    check "pod-$side-sysfs-own-only" in_pod "$side" sh -c '[ "$(ls /sys/class/infiniband | wc -l)" = 2 ] && ls /sys/class/infiniband | tr "\n" " "'
    check "pod-$side-rdma-env" in_pod "$side" env -u NCCL_IB_HCA NETWORK_STATUS_FILE="/tmp/status-$side" RDMA_ENV_OUT="/tmp/out-$side" RDMA_ENV_WAIT=0 \
        sh -c "sh $ENVSH sh -c 'env | grep -E \"^(NCCL_|UCX_|RDMANET_)\" | sort' > /tmp/env-$side 2> /tmp/env-$side.err; rc=\$?; cat /tmp/env-$side.err; exit \$rc"
done
show "what rdma-env.sh exported in pod-a from that file alone:"
sed 's/^/DEMO|   /' /tmp/env-a
check script-read-the-annotation grep -q "from /tmp/status-a" /tmp/env-a.err

# The same devices, interfaces, GID indexes, addresses and GID selection as rdmanet's rdma.env
# for the pod.
envval() { sed -n "s/^$2=//p" "$1"; }
same_as_rdmanet() { # SIDE
    _diff=""
    for key in NCCL_IB_HCA NCCL_SOCKET_IFNAME UCX_NET_DEVICES RDMANET_RAILS \
        RDMANET_RAIL0_IFNAME RDMANET_RAIL0_RDMA_DEVICE RDMANET_RAIL0_GID_INDEX RDMANET_RAIL0_ADDRESS RDMANET_RAIL0_PORT \
        RDMANET_RAIL1_IFNAME RDMANET_RAIL1_RDMA_DEVICE RDMANET_RAIL1_GID_INDEX RDMANET_RAIL1_ADDRESS RDMANET_RAIL1_PORT; do
        _r=$(envval "$PODS/uid-$1/rdma.env" "$key")
        _s=$(envval "/tmp/env-$1" "$key")
        [ -n "$_r" ] && [ "$_r" = "$_s" ] || _diff="$_diff $key: rdmanet [$_r] script [$_s];"
    done
    # How NCCL is told to pick GIDs: the same rule on both sides (a key may be absent on both).
    for key in NCCL_IB_ADDR_FAMILY NCCL_IB_ADDR_RANGE NCCL_IB_GID_INDEX; do
        _r=$(envval "$PODS/uid-$1/rdma.env" "$key")
        _s=$(envval "/tmp/env-$1" "$key")
        [ "$_r" = "$_s" ] || _diff="$_diff $key: rdmanet [$_r] script [$_s];"
    done
    [ -z "$_diff" ] || { echo "$_diff"; return 1; }
    echo "$(envval "/tmp/env-$1" NCCL_IB_HCA) $(envval "/tmp/env-$1" NCCL_SOCKET_IFNAME), GID indexes $(envval "/tmp/env-$1" RDMANET_RAIL0_GID_INDEX) $(envval "/tmp/env-$1" RDMANET_RAIL1_GID_INDEX)"
}
for side in a b; do
    check "pod-$side-same-as-rdma-env" same_as_rdmanet "$side"
    # Own devices (moved into the pod): NCCL finds each GID by family, no fixed index.
    check "pod-$side-own-devices-by-family" sh -c "[ \"\$(sed -n 's/^NCCL_IB_ADDR_FAMILY=//p' /tmp/env-$side)\" = AF_INET ] &&
        ! grep -q '^NCCL_IB_GID_INDEX=' /tmp/env-$side && echo 'AF_INET, no NCCL_IB_GID_INDEX'"
    check "pod-$side-nccl-conf" sh -c "[ \"\$(sed -n 's/^NCCL_CONF_FILE=//p' /tmp/env-$side)\" = /tmp/out-$side/nccl.conf ] &&
        grep -qx \"NCCL_IB_HCA=\$(sed -n 's/^NCCL_IB_HCA=//p' /tmp/env-$side)\" /tmp/out-$side/nccl.conf &&
        ! grep -qv '^NCCL_' /tmp/out-$side/nccl.conf && grep -q '^UCX_NET_DEVICES=' /tmp/out-$side/ucx.conf && echo 'nccl.conf, ucx.conf'"
done

# ibv_rc_pingpong on every rail with the device and GID index the script chose.
for k in $RAILS; do
    dev_a=$(envval /tmp/env-a "RDMANET_RAIL${k}_RDMA_DEVICE")
    dev_b=$(envval /tmp/env-b "RDMANET_RAIL${k}_RDMA_DEVICE")
    gi_a=$(envval /tmp/env-a "RDMANET_RAIL${k}_GID_INDEX")
    gi_b=$(envval /tmp/env-b "RDMANET_RAIL${k}_GID_INDEX")
    addr_a=$(envval /tmp/env-a "RDMANET_RAIL${k}_ADDRESS")
    check "rail$k-pingpong" pingpong pod-a "${dev_a:-none}" "${gi_a:-1}" pod-b "${dev_b:-none}" "${gi_b:-1}" "${addr_a:-0.0.0.0}" 20
    lab_fact "rail${k}_pingpong" "$dev_a/$gi_a <-> $dev_b/$gi_b: $(sed -n 's/.* \([0-9.]*\) usec\/iter.*/\1 usec\/iter/p' /tmp/pp-client.log)"
done

# The node agent in exclusive mode: the devices are visible only in the pods, so it reads each
# rail's GID table through the pod's netns. A round with nothing moved rewrites nothing and
# reports no error; after pod-a flaps net2 and adds its address back behind another one, one
# round brings rdmanet's files to the index the pod sees.
pod_files() { cat "$PODS/uid-a/rdma.env" "$PODS/uid-a/nccl.conf" "$PODS/uid-a/ucx.conf" \
    "$PODS/uid-b/rdma.env" "$PODS/uid-b/nccl.conf" "$PODS/uid-b/ucx.conf"; }
files_before=$(pod_files)
rc=0; agent_round /tmp/agent1.log || rc=$?
check agent-exclusive-round-clean sh -c "[ $rc -eq 0 ] && ! grep -q 'GID index of' /tmp/agent1.log && echo 'rc 0, nothing rewritten' || { echo 'rc $rc'; cat /tmp/agent1.log; exit 1; }"
check agent-exclusive-round-files-unchanged sh -c "[ \"\$1\" = \"\$2\" ] && echo 'the pod files as they were' || { echo \"now: \$2\"; exit 1; }" - "$files_before" "$(pod_files)"
dev=$(envval "$PODS/uid-a/rdma.env" RDMANET_RAIL1_RDMA_DEVICE)
addr=$(envval "$PODS/uid-a/rdma.env" RDMANET_RAIL1_ADDRESS)
old_index=$(envval "$PODS/uid-a/rdma.env" RDMANET_RAIL1_GID_INDEX)
readd_behind pod-a net2 "$dev" "$addr" 10.61.1.250 24 flap
new_index=$(roce_v2_gid_index pod-a "$dev" "$addr")
lab_fact gid_index_moved "$addr on $dev: $old_index -> ${new_index:-none}"
rc=0; agent_round /tmp/agent2.log || rc=$?
check agent-exclusive-round-follows-gid sh -c "[ $rc -eq 0 ] && [ -n '$new_index' ] && [ '$new_index' != '$old_index' ] &&
    [ \"\$(sed -n 's/^RDMANET_RAIL1_GID_INDEX=//p' $PODS/uid-a/rdma.env)\" = '$new_index' ] &&
    grep -q 'GID index of pod default/trainer-a' /tmp/agent2.log && echo 'rc 0, $old_index -> $new_index' || { echo 'rc $rc'; cat /tmp/agent2.log; exit 1; }"

for side in a b; do
    for k in $RAILS; do check "del-pod-$side-rail$k" cni DEL "pod-$side" "/tmp/$side$k.json" "net$((k + 1))"; done
done
check pod-directories-gone sh -c "[ -z \"\$(ls $PODS)\" ] && echo empty"
check nothing-left no_leftovers
check no-rdma-device-left no_rdma_devices
