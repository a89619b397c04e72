#!/bin/sh
# lab-kernel: 6.1
# lab-cmdline: ib_core.netns_mode=0
# Debian 12's own kernel, which cannot move RDMA devices between network
# namespaces (EOPNOTSUPP). First the kernel alone, recording the exact error;
# then through the CNI protocol: rdmanet with rdmaIsolation "required" fails
# ADD with code 105 and a message that says why, and leaves the node as it
# was (port back in the host, no soft-RoCE device, no state, no lease). After
# switching the node to shared mode, "required" is refused up front naming
# the mode and how to change it, and "auto" attaches with a shared device.
set -eu
. /lab/lib.sh

lab_fact kernel "$(uname -r)"
require netns-mode-exclusive sh -c 'rdma system show | grep -q "netns exclusive"'
$IP link add v0 type veth peer name v1
$IP link set v0 up
$IP link set v1 up
# rxe on 6.1 needs crc32_generic loaded first ("failed to add v0" otherwise).
require rxe-add rdma link add rxe0 type rxe netdev v0
$IP netns add t
if out=$(rdma dev set rxe0 netns t 2>&1); then
    lab_result move-refused fail "rdma dev set rxe0 netns t succeeded on $(uname -r): $out"
else
    lab_fact move_error "$out"
    case "$out" in
        *"Operation not supported"*) lab_result move-refused pass "EOPNOTSUPP: $out" ;;
        *) lab_result move-refused fail "unexpected error: $out" ;;
    esac
fi
check still-in-init-netns rdma dev show rxe0
$IP netns del t
rdma link del rxe0
$IP link del v0

# --- through rdmanet ------------------------------------------------------------
$IP link add va type veth peer name vb
$IP link set vb up # the wire's far end: the rail has carrier (ADD waits for it)
mac_before=$($IP -br link show va | awk '{print $3}')
$IP netns add pod-a
rail_conf va '"rdmaIsolation": "required"' > /tmp/a.json
if cni ADD pod-a /tmp/a.json > /tmp/res-a.json; then
    lab_result required-refused fail "ADD succeeded on $(uname -r): $(cat /tmp/res-a.json)"
else
    lab_fact required_error "$(json_str msg /tmp/res-a.json)"
    check required-refused sh -c "[ '$(json_num code /tmp/res-a.json)' = 105 ] && grep -q 'Operation not supported' /tmp/res-a.json && grep -q 'exclusive netns mode' /tmp/res-a.json"
fi
check port-back-unchanged sh -c "[ \"\$($IP -br link show va | awk '{print \$3}')\" = '$mac_before' ]"
check no-soft-roce-left no_rdma_devices
check no-leftovers no_leftovers
check del-after-failed-add cni DEL pod-a /tmp/a.json

# Shared mode (the mode can change only while no other netns exists): rdmanet's
# own switch explains the kernel's EBUSY while pod-a exists.
check rdmanet-reads-mode sh -c "[ \"\$($CNI_BIN/rdmanet rdma-netns-mode)\" = exclusive ]"
if out=$($CNI_BIN/rdmanet rdma-netns-mode shared 2>&1); then
    lab_result mode-switch-busy-explained fail "switched with pod-a alive: $out"
else
    check mode-switch-busy-explained sh -c "echo \"\$1\" | grep -q 'Device or resource busy' && echo \"\$1\" | grep -q 'shared is the kernel.s default' && echo \"\$1\"" - "$out"
fi
$IP netns del pod-a
require switch-to-shared sh -c "[ \"\$($CNI_BIN/rdmanet rdma-netns-mode shared)\" = shared ]"
check rdma-tool-agrees sh -c 'rdma system show | grep -q "netns shared"'
$IP netns add pod-a
if cni ADD pod-a /tmp/a.json > /tmp/res-a.json; then
    lab_result required-in-shared-mode-refused fail "ADD succeeded: $(cat /tmp/res-a.json)"
else
    lab_fact required_shared_error "$(json_str msg /tmp/res-a.json)"
    check required-in-shared-mode-refused sh -c "[ '$(json_num code /tmp/res-a.json)' = 105 ] && grep -q 'shared netns mode' /tmp/res-a.json && grep -q 'netns_mode=0' /tmp/res-a.json"
fi
check no-leftovers-shared no_leftovers
rail_conf va '"rdmaIsolation": "auto"' > /tmp/auto.json
check auto-attaches-shared sh -c ". /lab/lib.sh; cni ADD pod-a /tmp/auto.json > /tmp/res-auto.json"
# The GID index rdmanet reported is the one the pod sees (through uverbs).
ip_auto=$(json_str address /tmp/res-auto.json | cut -d/ -f1)
dev_auto=$(pod_rdma_dev pod-a)
gi_auto=$(reported_gid_index "$dev_auto")
seen_auto=$(roce_v2_gid_index pod-a "$dev_auto" "$ip_auto")
check auto-gid-reported sh -c "echo '$dev_auto $ip_auto: rdmanet ${gi_auto:-none}, ibv_devinfo ${seen_auto:-none}';
    [ -n '$dev_auto' ] && [ -n '$gi_auto' ] && [ '$gi_auto' = '$seen_auto' ]"
check auto-del cni DEL pod-a /tmp/auto.json
check no-leftovers-auto no_leftovers
$IP netns del pod-a
