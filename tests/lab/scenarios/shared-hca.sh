#!/bin/sh
# lab-kernel: 7.3
# lab-cmdline:
# The shared-HCA setup (k8s-rdma-shared-dev-plugin's): one RDMA device on each of two host
# NICs (rxe on the parent netdev, made here as a node of that setup would have it), and
# several pods per parent, each with a macvlan child from rdmanet (mode macvlan). As each
# pod sees it: the shared device is visible (shared netns mode), and rdmaIsolation
# "required" is refused with 105; a RoCE v2 GID for the pod's address appears on the
# shared device at the index rdmanet reports, different per pod (ibv_rc_pingpong between
# pods on different parents: soft-RoCE cannot carry it, see below, so it is measured and
# reported as a fact); DEL removes only that pod's GIDs; roce.tos on a shared device is
# device-wide: set when the device has the kernel's default, the same value again is fine,
# another one is refused (102) instead of overwriting it. Then softRoce in macvlan mode (the
# shipped soft-roce overlay): each pod its own rxe on its macvlan child, ibv_rc_pingpong and
# rping (rdma_cm) between two such pods, DEL removes it. A pod with its files on the shared
# device gets NCCL_IB_GID_INDEX, and one node agent round follows its GID index when the
# pod's address comes back at another one.
set -eu
. /lab/lib.sh

lab_fact kernel "$(uname -r)"
require netns-mode-shared sh -c 'rdma system show | grep -q "netns shared"'

# Two NICs on one wire, each with its RDMA device, as the node would have them.
$IP link add hca0 type veth peer name hca1
$IP link set hca0 up
$IP link set hca1 up
require rxe-on-parents sh -c "rdma link add rxe_hca0 type rxe netdev hca0 && rdma link add rxe_hca1 type rxe netdev hca1"

shared_conf() { # PARENT [EXTRA]
    cat <<JSON
{"cniVersion": "1.1.0", "name": "shared", "type": "rdmanet", "mode": "macvlan", "device": "$1",
 "gidTimeout": 20, "stateDir": "$CNI_STATE", "logFile": "$CNI_LOG", "logLevel": "info"${2:+, $2},
 "ipam": {"type": "rdmanet-ipam", "dataDir": "$CNI_IPAM",
          "ranges": [[{"subnet": "10.70.0.0/24", "rangeStart": "10.70.0.10"}]]}}
JSON
}
# pod P PARENT: a pod with a macvlan child of PARENT.
for p in 1 2 3 4; do
    parent=hca0
    [ "$p" -le 2 ] || parent=hca1
    $IP netns add "p$p"
    shared_conf "$parent" '"roce": {"tos": 106}' > "/tmp/p$p.json"
    require "add-p$p" sh -c ". /lab/lib.sh; cni ADD p$p /tmp/p$p.json > /tmp/res-p$p.json"
done
addr() { json_str address "/tmp/res-$1.json" | cut -d/ -f1; }
dev_of() { [ "$1" = p1 ] || [ "$1" = p2 ] && echo rxe_hca0 || echo rxe_hca1; }

check shared-device-visible-in-pod sh -c "$IP netns exec p1 rdma dev show | grep -q rxe_hca0 && echo 'p1 sees rxe_hca0'"
for p in p1 p2 p3 p4; do
    dev=$(dev_of "$p")
    gi=$(reported_gid_index "$dev" | tail -n1)
    gi=$(grep "RDMA $dev in /run/netns/$p:" "$CNI_LOG" | tail -n1 | sed -n 's/.*RoCE v2 GID index \([0-9-]*\).*/\1/p')
    seen=$(roce_v2_gid_index "$p" "$dev" "$(addr "$p")")
    eval "gi_$p=\$gi"
    check "gid-of-$p-on-shared-device" sh -c "[ -n '$gi' ] && [ '$gi' = '$seen' ] && echo '$p $(addr "$p"): $dev GID index $gi (the pod sees $seen)'"
done
check gid-indexes-differ-per-pod sh -c "[ '$gi_p1' != '$gi_p2' ] && [ '$gi_p3' != '$gi_p4' ] && echo 'p1 $gi_p1, p2 $gi_p2; p3 $gi_p3, p4 $gi_p4'"
lab_fact gid_table_rxe_hca0 "$(nsx p1 ibv_devinfo -v -d rxe_hca0 | grep 'GID\[' | tr -s ' \t' ' ' | tr '\n' ';')"

# Traffic: soft-RoCE receives RoCE v2 (UDP 4791) on a socket in its netdev's netns only;
# a packet for a macvlan child's address arrives in the pod's netns, where the shared rxe has
# none, so RC traffic between such GIDs does not flow (an RDMA NIC steers RoCE itself).
# Measured and reported, not a check: this is soft-RoCE's, not rdmanet's.
udp4791() { nsx "$1" cat /proc/net/udp /proc/net/udp6 | awk '$2 ~ /:12B7$/' | wc -l; }
lab_fact rxe_udp4791_sockets "host: $(awk '$2 ~ /:12B7$/' /proc/net/udp /proc/net/udp6 | wc -l), pod p3: $(udp4791 p3)"
short_pingpong() { # 5 iterations, 8 s at most (RC retries forever when nothing answers)
    nsx p1 timeout 10 ibv_rc_pingpong -d rxe_hca0 -g "${gi_p1:-1}" -n 5 > /dev/null 2>&1 &
    sleep 1
    nsx p3 timeout 8 ibv_rc_pingpong -d rxe_hca1 -g "${gi_p3:-1}" -n 5 "$(addr p1)" > /dev/null 2>&1
    _rc=$?
    wait
    return $_rc
}
if short_pingpong; then
    lab_fact shared_rxe_pingpong_between_macvlan_pods works
else
    lab_fact shared_rxe_pingpong_between_macvlan_pods "fails (no rxe UDP 4791 socket in the pods' netns)"
fi

# roce.tos is device-wide on a shared device: 106 was set by p1's ADD, the same again is
# fine, another value is refused rather than silently taking the device from the others.
check tos-is-device-wide sh -c "[ \"\$(cat /sys/kernel/config/rdma_cm/rxe_hca0/ports/1/default_roce_tos)\" = 106 ] && echo 'rxe_hca0 default_roce_tos 106'"
$IP netns add p5
shared_conf hca0 '"roce": {"tos": 96}' > /tmp/p5.json
tos_refused() {
    if cni ADD p5 /tmp/p5.json > /tmp/res-p5.json; then echo "ADD with another ToS succeeded"; return 1; fi
    [ "$(json_num code /tmp/res-p5.json)" = 102 ] || { cat /tmp/res-p5.json; return 1; }
    [ "$(cat /sys/kernel/config/rdma_cm/rxe_hca0/ports/1/default_roce_tos)" = 106 ] || { echo "ToS overwritten"; return 1; }
    [ -z "$(nsx p5 $IP -o link show | grep -v ' lo:')" ] || { echo "p5 kept a link"; return 1; }
    echo "102: $(json_str msg /tmp/res-p5.json)"
}
check tos-other-value-refused tos_refused

# rdmaIsolation required cannot hold for a device the pods share.
$IP netns add p6
shared_conf hca0 '"rdmaIsolation": "required"' > /tmp/p6.json
isolation_refused() {
    if cni ADD p6 /tmp/p6.json > /tmp/res-p6.json; then echo "ADD succeeded"; return 1; fi
    [ "$(json_num code /tmp/res-p6.json)" = 105 ] || { cat /tmp/res-p6.json; return 1; }
    echo "105: $(json_str msg /tmp/res-p6.json)"
}
check required-isolation-refused-105 isolation_refused

# A pod with its files (K8S_POD_UID) on the shared device: the other pods' GIDs share the
# table, so its rdma.env names the index (NCCL_IB_GID_INDEX), not a family. When its
# address comes back behind another one, the index moves; one node-agent round (reading the
# shared device's table in the host's sysfs) rewrites the pod's files.
$IP netns add p9
shared_conf hca0 > /tmp/p9.json
POD_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=shared-9;K8S_POD_UID=uid-9"
require add-p9-with-files sh -c ". /lab/lib.sh; POD_ARGS='$POD_ARGS' cni ADD p9 /tmp/p9.json > /tmp/res-p9.json"
POD_ARGS=""
env9() { sed -n "s/^$1=//p" /run/rdmanet/pods/uid-9/rdma.env; }
before9=$(env9 NCCL_IB_GID_INDEX)
check shared-device-files-name-the-index sh -c "[ -n '$before9' ] && [ '$before9' = \"\$(. /lab/lib.sh; roce_v2_gid_index p9 rxe_hca0 $(addr p9))\" ] &&
    ! grep -q '^NCCL_IB_ADDR_FAMILY=' /run/rdmanet/pods/uid-9/rdma.env && echo 'NCCL_IB_GID_INDEX=$before9'"
readd_behind p9 net1 rxe_hca0 "$(addr p9)" 10.70.0.250 24
after9=$(roce_v2_gid_index p9 rxe_hca0 "$(addr p9)")
lab_fact shared_gid_index_moved "$(addr p9): $before9 -> ${after9:-none}"
rc=0; agent_round /tmp/agent9.log || rc=$?
check agent-round-rewrites-shared-index sh -c "[ $rc -eq 0 ] && [ -n '$after9' ] && [ '$after9' != '$before9' ] &&
    [ \"\$(sed -n 's/^NCCL_IB_GID_INDEX=//p' /run/rdmanet/pods/uid-9/rdma.env)\" = '$after9' ] &&
    grep -q 'GID index of pod default/shared-9' /tmp/agent9.log && echo '$before9 -> $after9' || { cat /tmp/agent9.log; exit 1; }"
require del-p9 cni DEL p9 /tmp/p9.json
check p9-files-gone sh -c "[ ! -e /run/rdmanet/pods/uid-9 ] && echo gone"

# DEL of p2: its GID goes, p1's stay.
gids_with() { nsx p1 ibv_devinfo -v -d rxe_hca0 | grep -c "$1," || true; }
require del-p2 cni DEL p2 /tmp/p2.json
only_p2_gone() {
    wait_for 10 sh -c "[ \$(. /lab/lib.sh; nsx p1 ibv_devinfo -v -d rxe_hca0 | grep -c '$(addr p2),') -eq 0 ]" ||
        { echo "p2's GID is still there"; return 1; }
    [ "$(gids_with "$(addr p1)")" -ge 1 ] || { echo "p1's GID went too"; return 1; }
    [ "$(roce_v2_gid_index p1 rxe_hca0 "$(addr p1)")" = "$gi_p1" ] || { echo "p1's GID moved"; return 1; }
    echo "p2's GID gone; p1's still at index $gi_p1"
}
check del-removes-only-its-gids only_p2_gone
for p in p1 p3 p4; do require "del-$p" cni DEL "$p" "/tmp/$p.json"; done
check shared-nothing-left no_leftovers
check shared-devices-stay sh -c "rdma dev show | grep -c 'rxe_hca' | grep -qx 2 && echo 'rxe_hca0 and rxe_hca1 stay (the node'\"'\"'s)'"

# softRoce in macvlan mode (the soft-roce overlay, for nodes without RDMA NICs): each pod its
# own rxe on its child. The parents' rxe go first: a parent's device also lists its macvlan
# children's addresses as GIDs, so rdma_cm (rping) could bind a pod's address to the
# parent's device, which receives nothing of the pod's (the REQ is then rejected, 8).
require rxe-off-parents sh -c "rdma link del rxe_hca0 && rdma link del rxe_hca1"
for p in 7 8; do
    parent=hca0
    [ "$p" -eq 7 ] || parent=hca1
    $IP netns add "p$p"
    shared_conf "$parent" '"softRoce": true' > "/tmp/p$p.json"
    require "add-softroce-p$p" sh -c ". /lab/lib.sh; cni ADD p$p /tmp/p$p.json > /tmp/res-p$p.json"
done
d7=$(pod_rdma_dev p7)
d8=$(pod_rdma_dev p8)
g7=$(reported_gid_index "$d7")
g8=$(reported_gid_index "$d8")
check softroce-own-device-per-pod sh -c "[ -n '$d7' ] && [ -n '$d8' ] && [ '$d7' != '$d8' ] && echo 'p7 $d7, p8 $d8'"
check softroce-pingpong pingpong p7 "$d7" "${g7:-1}" p8 "$d8" "${g8:-1}" "$(addr p7)" 20
check softroce-rping rping_between p7 "$(addr p7)" p8
for p in p7 p8; do require "del-$p" cni DEL "$p" "/tmp/$p.json"; done
check softroce-devices-deleted rdma_devices_absent "$d7" "$d8"
check softroce-nothing-left no_leftovers
