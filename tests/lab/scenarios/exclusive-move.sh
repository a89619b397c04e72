#!/bin/sh
# lab-kernel: 7.3
# lab-cmdline: ib_core.netns_mode=0
# Exclusive netns mode set the way operators do it (ib_core netns_mode=0 at
# module load). Establishes: an RDMA device moves into a netns with
# RDMA_NLDEV_CMD_SET (rdma dev set DEV netns NS), is then visible only there,
# comes back to the init netns when that netns is deleted; and verbs traffic
# flows between two pods whose soft-RoCE devices were moved in.
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
check gone-from-init sh -c '! rdma dev show rxet'
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

# --- two pods, devices moved in ------------------------------------------------
two_pods_on_veth
# NEWLINK from inside the pod: in exclusive mode too the device is
# registered in the init netns, and must then be moved in.
require rxe-add-in-netns-a nsx a rdma link add rxea type rxe netdev va
require rxe-add-in-netns-b nsx b rdma link add rxeb type rxe netdev vb
check created-in-init-netns sh -c 'rdma dev show rxea && ! nsx a rdma dev show rxea 2>/dev/null'
require move-a rdma dev set rxea netns a
require move-b rdma dev set rxeb netns b
check isolated-a-sees-only-own sh -c "$IP netns exec a rdma dev show rxea && ! $IP netns exec a rdma dev show rxeb"
check isolated-init-sees-none sh -c '[ -z "$(rdma dev show)" ]'
check gid-a wait_for 10 sh -c '[ -n "$(. /lab/lib.sh; roce_v2_gid_index a rxea 10.0.0.1)" ]'
check gid-b wait_for 10 sh -c '[ -n "$(. /lab/lib.sh; roce_v2_gid_index b rxeb 10.0.0.2)" ]'
ga=$(roce_v2_gid_index a rxea 10.0.0.1)
gb=$(roce_v2_gid_index b rxeb 10.0.0.2)
lab_fact gid_index_a "${ga:-none} (::ffff:10.0.0.1 RoCE v2, seen from netns a)"
lab_fact gid_index_b "${gb:-none} (::ffff:10.0.0.2 RoCE v2, seen from netns b)"
check ibv-rc-pingpong pingpong a rxea "${ga:-1}" b rxeb "${gb:-1}" 10.0.0.1 200
[ "$LAB_LAST" = fail ] || lab_fact pingpong_latency "$(grep 'usec/iter' /tmp/pp-client.log)"
# What the kernel said about moving a device (QP1/GSI cannot follow it).
lab_fact dmesg_on_move "$(dmesg | grep -i -E 'qp1|gsi|rxe|netns' | grep -v -E 'loaded|registered' | tail -n 3)"

# Teardown as the product does it: delete from inside the pod netns.
check rxe-del-in-netns nsx a rdma link del rxea
nsx b rdma link del rxeb || true
$IP netns del a
$IP netns del b
