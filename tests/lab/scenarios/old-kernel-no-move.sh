#!/bin/sh
# lab-kernel: 6.1
# lab-cmdline: ib_core.netns_mode=0
# Debian 12's own kernel in exclusive mode: soft-RoCE works, but moving an
# RDMA device to another netns is refused. Records the exact error the
# product must turn into a clear CNI error.
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
# Switching modes while another netns exists: EBUSY (recorded, not asserted).
lab_fact mode_change_with_netns "$(rdma system set netns shared 2>&1 || true)"
$IP netns del t
rdma link del rxe0
