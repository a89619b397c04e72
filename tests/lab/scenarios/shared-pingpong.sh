#!/bin/sh
# lab-kernel: 7.3
# lab-cmdline:
# Shared netns mode (the default): two "pods" (netns a, b) on the two ends of
# one veth pair, a soft-RoCE device created from inside each pod's netns.
# Establishes: the device is registered in the init netns, the RoCE v2 GID of
# the pod address appears, and verbs (ibv_rc_pingpong) and rdma_cm (rping)
# traffic flows between the pods.
set -eu
. /lab/lib.sh

lab_fact kernel "$(uname -r)"
require netns-mode-shared sh -c 'rdma system show | grep -q "netns shared"'
lab_fact netns_mode "$(rdma system show | head -n1)"

# Two pods on one veth pair.
two_pods_on_veth

# What `rdma link add` sends (RDMA_NLDEV_CMD_NEWLINK), issued inside the pod.
require rxe-add-in-netns-a nsx a rdma link add rxea type rxe netdev va
require rxe-add-in-netns-b nsx b rdma link add rxeb type rxe netdev vb
# In shared mode the device lives in the init netns and every netns sees it.
check rxe-registered-in-init-netns sh -c 'rdma dev show rxea && rdma dev show rxeb'
lab_fact rdma_link_a "$(nsx a rdma link show rxea/1)"

# The RoCE v2 GID for each pod address, as the pod sees it.
check gid-a wait_for 10 sh -c '[ -n "$(. /lab/lib.sh; roce_v2_gid_index a rxea 10.0.0.1)" ]'
check gid-b wait_for 10 sh -c '[ -n "$(. /lab/lib.sh; roce_v2_gid_index b rxeb 10.0.0.2)" ]'
ga=$(roce_v2_gid_index a rxea 10.0.0.1)
gb=$(roce_v2_gid_index b rxeb 10.0.0.2)
lab_fact gid_index_a "${ga:-none} (::ffff:10.0.0.1 RoCE v2)"
lab_fact gid_index_b "${gb:-none} (::ffff:10.0.0.2 RoCE v2)"
lab_fact gid_table_a "$(nsx a ibv_devinfo -v -d rxea | grep 'GID\[')"

# Verbs RC traffic between the pods.
check ibv-rc-pingpong pingpong a rxea "${ga:-1}" b rxeb "${gb:-1}" 10.0.0.1 200
[ "$LAB_LAST" = fail ] || lab_fact pingpong_latency "$(grep 'usec/iter' /tmp/pp-client.log)"

# rdma_cm traffic (rping resolves the route and GID itself). rping's server
# is not visible in /proc/net/tcp: retry the client briefly instead.
nsx a timeout 60 rping -s -a 10.0.0.1 -C 10 -v > /tmp/rping-server.log 2>&1 &
srv=$!
rping_client() {
    for _i in 1 2 3 4 5 6 7 8 9 10; do
        nsx b timeout 30 rping -c -a 10.0.0.1 -C 10 -v && return 0
        sleep 0.5
    done
    return 1
}
check rping rping_client
wait "$srv" || lab_result rping-server fail "$(cat /tmp/rping-server.log)"

# Teardown, as the product does it: delete the device from the pod netns.
check rxe-del nsx a rdma link del rxea
nsx b rdma link del rxeb
$IP netns del a
$IP netns del b
