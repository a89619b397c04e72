#!/bin/sh
# lab-kernel: 7.3
# lab-nodes: 2
# lab-workloads: ucx-mpi two-node
# Two nodes, as rdmanet's pods use RDMA across them. What this stands in for: two guests of the
# lab kernel (node a, node b) under QEMU, each NIC an emulated Intel e1000e (it negotiates its
# link after every down/up, as server NICs do), each "wire" a point-to-point link between two
# UDP sockets on the host's loopback (QEMU's -netdev dgram), and RDMA is soft-RoCE (rxe) on the
# pod's e1000e, not an RDMA NIC and not a switch. Wire w0 carries this script's own
# synchronisation (lib.sh node_setup); w1 and w2 are the data wires; the same script runs on
# both nodes, each half doing its node's part ($LAB_NODE) and reporting its own checks.
#
# (a) ADD answers when the rail is usable (portTimeout, requireActive), in shared mode and with
#     rdmaIsolation "required", each node on its own end of w1 (QEMU's set_link on that end
#     only: the other end keeps its carrier, the dgram wire carries no link state): a wire that
#     comes up while ADD waits: ADD answers after it, the port ACTIVE and the rail "up" in the
#     pod's files; a wire that stays down: ADD goes on after portTimeout, warns naming the
#     port's state and marks the rail down (rails.json, rdma.env); with requireActive it
#     fails with 108 naming the port and is rolled back (the NIC home as w1, no soft-RoCE
#     device, record or lease left).
# (b) RDMA across the nodes right after ADD, in shared mode and with rdmaIsolation "required"
#     (exclusive mode, the device moved into the pod): on each node a pod gets the node's
#     e1000e on w1 (netdev mode, softRoce, roce.tos 72, pod files on); ibv_rc_pingpong between
#     the nodes' pods with each pod's device and RoCE v2 GID index from its rdma.env, started
#     as soon as ADD returned; the index equals what the pod sees; then the seed's launch,
#     `mpirun --mca pml ucx` from pod-a, one rank per node, the rank on node b started by a real
#     remote shell (Debian's dropbear in pod-b's netns, its client dbclient as Open MPI's
#     plm_rsh_agent, keys made here), each rank's UCX settings only from its own pod's files
#     (UCX_CONFIG_DIR, no UCX_TLS: no shared memory between nodes, and no rank uses any):
#     MPI_Allreduce right on both ranks, every lane on the rank's own device, and every RoCE
#     v2 packet on the wire, both ways, with the NAD's class (tos 0x48).
# (c) two rails per pod on two wires, both rails in one subnet: rdmanet's source routing
#     (per-rail rules and tables) keeps each rail's traffic (ping and rdma_cm's rping from the
#     rail's address) on its own wire, counted on both ends.
# (d) cluster IPAM across the nodes: a real etcd (Debian's etcd-server) on node a on its w0
#     address, reached by node b over w0; one NAD with ipam.cluster on both nodes, pods on
#     both nodes (devices by runtimeConfig.deviceID, as a device plugin gives them) with
#     distinct addresses, each in a block etcd gives its node; node b's pods deleted and its
#     block given back (etcd), a new pod there gets an address again; at the end no block left.
set -eu
. /lab/lib.sh
export CNI_STATE=/run/rdmanet-state
PODS=/run/rdmanet/pods
TOS=72
ME=$LAB_NODE
# This node's host numbers: 1x on node a, 2x on node b.
NB=$([ "$ME" = a ] && echo 1 || echo 2)

lab_fact kernel "$(uname -r)"
require workloads-in-image sh -c 'command -v mpirun && command -v dropbear && command -v dbclient && command -v etcd && [ -x /opt/lab/allreduce ]'
require node-setup node_setup
if [ "$ME" = a ]; then
    # Cluster IPAM's store, started now so that it is up by (d).
    etcd --name node-a --data-dir /tmp/etcd \
        --listen-client-urls http://192.168.77.1:2379 --advertise-client-urls http://192.168.77.1:2379 \
        --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
        --initial-cluster node-a=http://127.0.0.1:2380 > /tmp/etcd.log 2>&1 &
fi
lab_time setup
W1_PCI=$(basename "$(readlink /sys/class/net/w1/device)")
mkdir -p /opt/pod
# A node's /dev/shm, as pods have it (UCX's shared memory transports need it).
mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm

# net_conf NAME ISOLATION IPAM_JSON [EXTRA_MEMBERS]: a NAD of rdmanet in netdev mode with
# soft-RoCE, the class and pod files on.
net_conf() {
    cat <<JSON
{"cniVersion": "1.1.0", "name": "$1", "type": "rdmanet",${4:+ $4,}
 "softRoce": true, "rdmaIsolation": "$2", "gidTimeout": 20, "stateDir": "$CNI_STATE",
 "podInfoDir": "$PODS", "roce": {"tos": $TOS}, "logFile": "$CNI_LOG", "logLevel": "info",
 "ipam": $3}
JSON
}
# node_ipam SUBNET FIRST LAST: rdmanet-ipam in node mode, this node's addresses FIRST..LAST.
node_ipam() {
    echo "{\"type\": \"rdmanet-ipam\", \"dataDir\": \"$CNI_IPAM\", \"ranges\": [[{\"subnet\": \"$1\", \"rangeStart\": \"$2\", \"rangeEnd\": \"$3\"}]]}"
}
# pod_add POD CONF IFNAME UID: ADD for pod POD (netns POD) as containerd + Multus call it.
pod_add() {
    POD_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=$1;K8S_POD_UID=$4" \
        cni ADD "$1" "$2" "$3" > "/tmp/res-$1-$3.json" || { cat "/tmp/res-$1-$3.json"; return 1; }
    echo "$3: $(json_str address "/tmp/res-$1-$3.json")"
}
pod_del() { cni DEL "$1" "$2" "$3" > /tmp/res-del.json || { cat /tmp/res-del.json; return 1; }; }
kv() { sed -n "s/^$2=//p" "$1"; }

# wait_listening NS HEXPORT SECONDS: a TCP socket in NS listens on the port (IPv4 or IPv6).
wait_listening() {
    wait_for "$3" sh -c "$IP netns exec $1 cat /proc/net/tcp /proc/net/tcp6 | awk '\$2 ~ /:$2\$/ && \$4 == \"0A\" { f = 1 } END { exit !f }'"
}
# rc_ok RC LOG: for check: RC (a background job's exit status: `wait` works only in the
# shell that started the job, not in check's subshell) is 0; LOG's last lines.
rc_ok() { tail -n 2 "$2"; [ "$1" -eq 0 ]; }
# stop_job PID: SIGTERM, then SIGKILL after 5 s; waits for it (when it is this shell's job).
stop_job() {
    kill "$1" 2>/dev/null || true
    wait_for 5 sh -c "! kill -0 $1" || kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# stop_pod_processes NS: SIGKILL to every process in netns NS (a background job started
# through a shell function is a subshell whose pid is not the program's).
stop_pod_processes() {
    for _p in $($IP netns pids "$1"); do kill -9 "$_p" 2>/dev/null || true; done
    wait_for 5 sh -c "[ -z \"\$($IP netns pids $1)\" ]" || true
}

# in_pod: lib.sh's.

# ---- (b) RDMA across the nodes right after ADD -------------------------------------------------

# roce_tos_both_ways PCAP ADDR_A ADDR_B MIN: every RoCE v2 packet in PCAP carries tos TOS, and
# each of the two addresses sent at least MIN of them.
roce_tos_both_ways() {
    tcpdump -Z root -r "$1" -tt -n -v 2>/dev/null | awk -v a="$2" -v b="$3" -v min="$4" -v want="tos 0x$(printf %x $TOS)," '
        /proto UDP/ { ok = index($0, want) > 0; if (t0 == "") t0 = $1; t1 = $1; next }
        / > / { src = $1; sub(/\.[0-9]+$/, "", src); n[src]++; if (!ok) bad[src]++ }
        END {
            for (s in n) { all += n[s]; nbad += bad[s] }
            printf "RoCE v2 packets: %d from %s, %d from %s, %d in all over %.1f s; not %s: %d\n", n[a], a, n[b], b, all, t1 - t0, want, nbad
            exit !(n[a] >= min && n[b] >= min && n[a] + n[b] == all && nbad == 0)
        }'
}
# allreduce_across ISO ADDR PEER_ADDR: the seed's launch from pod-a: one rank per node, the
# remote one through dbclient into pod-b (dropbear there); every rank's sum right, rank 1 on
# pod-b.
allreduce_across() {
    printf '%s slots=1\n%s slots=1\n' "$2" "$3" > /tmp/hosts
    _rc=0
    in_pod a env HOME=/root timeout 150 mpirun --allow-run-as-root -np 2 --hostfile /tmp/hosts --tag-output \
        --mca plm_rsh_agent "dbclient -y -i /root/.ssh/id_dropbear" --mca oob_tcp_if_include net1 \
        --mca pml ucx --mca btl '^vader,tcp,openib' -x UCX_CONFIG_DIR -x UCX_LOG_LEVEL=info \
        /opt/lab/allreduce 32768 > "/tmp/mpi-$1.log" 2>&1 || _rc=$?
    if [ "$_rc" -ne 0 ]; then
        sed 's/^/LAB-LOG mpirun| /' "/tmp/mpi-$1.log" > /dev/console
        echo "mpirun rc $_rc: $(tail -n 8 "/tmp/mpi-$1.log")"; return 1
    fi
    for _r in 0 1; do
        _host=$([ "$_r" -eq 0 ] && echo pod-a || echo pod-b)
        grep -q "^\[1,$_r\]<stdout>:allreduce rank $_r of 2 on $_host: .*, 0 wrong$" "/tmp/mpi-$1.log" ||
            { echo "rank $_r: $(grep "^\[1,$_r\]" "/tmp/mpi-$1.log" | grep allreduce)"; return 1; }
    done
    grep '<stdout>:allreduce' "/tmp/mpi-$1.log" | sed 's/.*<stdout>://' | tr '\n' ';'
}
# lanes_own ISO DEV_A DEV_B: UCX's lanes as each rank reports them (UCX_LOG_LEVEL=info,
# "ep_cfg[N]: tag(<transport>/<device> ...)"): the endpoint to the other node's rank has only
# verbs lanes on the rank's own pod's device: no shared memory (posix, sysv, cma, xpmem,
# knem), no tcp, nothing on another device; shared memory shows up only on the endpoint to
# itself (the one with "self/").
lanes_own() {
    for _r in 0 1; do
        _dev=$([ "$_r" -eq 0 ] && echo "$2" || echo "$3")
        _remote=$(grep "^\[1,$_r\]" "/tmp/mpi-$1.log" | grep 'ep_cfg' | grep -v 'self/' || true)
        [ -n "$_remote" ] || { echo "rank $_r reported no ep_cfg to the other rank: $(grep "^\[1,$_r\]" "/tmp/mpi-$1.log" | grep -i ucx | tail -n 3)"; return 1; }
        _lanes=$(echo "$_remote" | sed 's/.*ep_cfg\[[0-9]*\]: *//' | grep -o '[a-z0-9_]*/[A-Za-z0-9_.-]*\(:[0-9]*\)\?' | sort -u | tr '\n' ' ')
        [ -n "$_lanes" ] || { echo "rank $_r: no lanes in: $_remote"; return 1; }
        for _l in $_lanes; do
            case "$_l" in
                rc_verbs/"$_dev":1|ud_verbs/"$_dev":1) ;;
                *) echo "rank $_r has lane $_l to the other node (its device: $_dev): $(echo "$_remote" | sed 's/.*ep_cfg/ep_cfg/' | tr '\n' ';')"; return 1 ;;
            esac
        done
        _self=$(grep "^\[1,$_r\]" "/tmp/mpi-$1.log" | grep 'ep_cfg' | grep 'self/' | sed 's/.*ep_cfg\[[0-9]*\]: *//' | head -n 1)
        echo "rank $_r to the other node: $_lanes(to itself: $_self)"
    done
}

# rdma_across ISOLATION: (b) with rdmaIsolation ISOLATION (off: shared mode).
rdma_across() {
    _iso=$1 _pod=pod-$ME _uid=uid-$ME
    $IP netns add "$_pod"
    nsx "$_pod" "$IP" link set lo up
    net_conf b-rail "$_iso" "$(node_ipam 10.80.1.0/24 "10.80.1.${NB}0" "10.80.1.${NB}9")" '"device": "w1"' > "/tmp/b-$_iso.json"
    barrier "$_iso-add"
    _t0=$(cut -d' ' -f1 /proc/uptime)
    require "$_iso-add" pod_add "$_pod" "/tmp/b-$_iso.json" net1 "$_uid"
    _t1=$(cut -d' ' -f1 /proc/uptime)
    _env=$PODS/$_uid/rdma.env
    _dev=$(kv "$_env" RDMANET_RAIL0_RDMA_DEVICE) _gid=$(kv "$_env" RDMANET_RAIL0_GID_INDEX)
    _addr=$(kv "$_env" RDMANET_RAIL0_ADDRESS)
    lab_fact "$_iso-port-right-after-add" "$_dev $(port_state "$_pod" "$_dev"), net1 carrier $(wire_carrier "$_pod" net1); ADD ran from uptime $_t0 to $_t1, the e1000e's last link-up: $(dmesg | grep "$W1_PCI.*Link is Up" | tail -n 1 | cut -d']' -f1 | tr -d '[ ')"
    lab_time "${_iso}added"
    require "$_iso-send-env" peer_send "$_iso-env" "$_env"
    require "$_iso-peer-env" peer_wait "$_iso-env"
    cp "$LAB_INBOX/$_iso-env" "/tmp/peer-$_iso.env"
    _paddr=$(kv "/tmp/peer-$_iso.env" RDMANET_RAIL0_ADDRESS)
    _pdev=$(kv "/tmp/peer-$_iso.env" RDMANET_RAIL0_RDMA_DEVICE)
    if [ "$ME" = b ]; then
        nsx "$_pod" timeout 60 ibv_rc_pingpong -d "$_dev" -g "$_gid" -n 100 > /tmp/pp-server.log 2>&1 &
        _srv=$!
        # The QP exchange: TCP 18515 (0x4853).
        check "$_iso-pingpong-server-listening" wait_listening "$_pod" 4853 30
        peer_send "$_iso-pp-ready"
        _rc=0; wait "$_srv" || _rc=$?
        check "$_iso-pingpong-server" rc_ok "$_rc" /tmp/pp-server.log
    else
        require "$_iso-pingpong-server-ready" peer_wait "$_iso-pp-ready" 60
        check "$_iso-pingpong-across" nsx "$_pod" timeout 60 ibv_rc_pingpong -d "$_dev" -g "$_gid" -n 100 "$_paddr"
    fi
    lab_time "${_iso}pingpong"
    check "$_iso-reported-gid-index" sh -c ". /lab/lib.sh; i=\$(roce_v2_gid_index $_pod $_dev $_addr);
        echo \"rdma.env: $_dev index $_gid; the pod sees ::ffff:$_addr at \$i\"; [ \"\$i\" = '$_gid' ]"
    check "$_iso-ucx-conf-class" grep -qx "UCX_IB_TRAFFIC_CLASS=$TOS" "$PODS/$_uid/ucx.conf"

    # The seed's launch across the nodes through a real remote shell.
    if [ "$ME" = a ]; then
        if [ ! -f /root/.ssh/id_dropbear ]; then
            mkdir -p /root/.ssh && chmod 700 /root /root/.ssh
            dropbearkey -t ed25519 -f /root/.ssh/id_dropbear > /dev/null 2>&1
        fi
        dropbearkey -y -f /root/.ssh/id_dropbear | grep '^ssh-' > /tmp/id.pub
        require "$_iso-send-key" peer_send "$_iso-key" /tmp/id.pub
        # Not through nsx: $! must be tcpdump's pid (ip netns exec execs it).
        "$IP" netns exec "$_pod" tcpdump -Z root -U -n -i net1 -w "/tmp/mpi-$_iso.pcap" udp port 4791 > "/tmp/tcpdump-$_iso.log" 2>&1 &
        _dump=$!
        check "$_iso-tcpdump-listening" wait_for 30 grep -q 'listening on' "/tmp/tcpdump-$_iso.log"
        lab_time "${_iso}dump"
        require "$_iso-sshd-ready" peer_wait "$_iso-sshd" 60
        lab_time "${_iso}sshd"
        check "$_iso-mpi-allreduce-across" allreduce_across "$_iso" "$_addr" "$_paddr"
        stop_job "$_dump"
        lab_time "${_iso}mpi"
        lab_fact "$_iso-rxe-counters-after-mpi" "$(nsx "$_pod" rdma statistic show link "$_dev/1" 2>&1 | tr -s ' ' | tr '\n' ' ')"
        check "$_iso-mpi-lanes-own-devices" lanes_own "$_iso" "$_dev" "$_pdev"
        check "$_iso-tos-on-wire-both-ways" roce_tos_both_ways "/tmp/mpi-$_iso.pcap" "$_addr" "$_paddr" 100
        lab_time "${_iso}tos"
        peer_send "$_iso-mpi-done"
    else
        require "$_iso-authorized-key" peer_wait "$_iso-key" 60
        mkdir -p /root/.ssh && chmod 700 /root /root/.ssh
        cp "$LAB_INBOX/$_iso-key" /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys
        [ -f /tmp/dropbear-hostkey ] || dropbearkey -t ed25519 -f /tmp/dropbear-hostkey > /dev/null 2>&1
        # The ssh server of pod-b: in its netns, with its host name and files (in_pod), on its
        # rail address; password logins off.
        in_pod b dropbear -F -E -s -j -k -p "$_addr:22" -r /tmp/dropbear-hostkey -P /tmp/dropbear.pid > "/tmp/dropbear-$_iso.log" 2>&1 &
        require "$_iso-sshd-listening" wait_listening "$_pod" 0016 30
        peer_send "$_iso-sshd"
        peer_wait "$_iso-mpi-done" 200 || true
        check "$_iso-remote-shell-login" sh -c "grep \"Pubkey auth succeeded for 'root' with .* from $_paddr:\" /tmp/dropbear-$_iso.log"
        stop_job "$(cat /tmp/dropbear.pid)"
    fi
    barrier "$_iso-done" 200
    # As a runtime stops a pod: its processes first (dropbear's, tcpdump), then DEL.
    stop_pod_processes "$_pod"
    check "$_iso-del" pod_del "$_pod" "/tmp/b-$_iso.json" net1
    $IP netns del "$_pod"
    check "$_iso-nothing-left" sh -c '. /lab/lib.sh; no_leftovers && no_rdma_links'
}


# ---- (a) ADD answers when the rail is usable ------------------------------------------------

# rail_port_state ISO POD: the state of the pod's rail's RDMA port (rdma.env's device), where it
# lives (exclusive mode: in the pod).
rail_port_state() {
    _d=$(kv "$PODS/uid-$2/rdma.env" RDMANET_RAIL0_RDMA_DEVICE)
    if [ "$1" = required ]; then port_state "$2" "$_d"; else port_state - "$_d"; fi
}
# log_since MARK: the rdmanet log's lines after line MARK.
log_since() { tail -n "+$(( $1 + 1 ))" "$CNI_LOG"; }
# added_after_link_up ISO POD CONF: with this node's end of w1 down, ADD waits; the wire comes
# up 2 s after the GIDs are there (ADD is then in its port wait); ADD answers after that, with
# the port ACTIVE at once and the rail up in the pod's files.
added_after_link_up() {
    _mark=$(wc -l < "$CNI_LOG")
    _t0=$(cut -d' ' -f1 /proc/uptime)
    rm -f "/tmp/rc-$2"
    (POD_ARGS="IgnoreUnknown=1;K8S_POD_UID=uid-$2" cni ADD "$2" "$3" net1 > "/tmp/res-$2.json"; echo $? > "/tmp/rc-$2") &
    _job=$!
    wait_for 30 sh -c "tail -n +$((_mark + 1)) $CNI_LOG | grep -q 'RoCE v2 GID index'" ||
        { echo "ADD never reached its port wait: $(log_since "$_mark" | tail -n 3)"; wait "$_job"; return 1; }
    sleep 2
    [ ! -s "/tmp/rc-$2" ] || { echo "ADD answered before the wire came up: $(cat "/tmp/res-$2.json")"; return 1; }
    _t1=$(cut -d' ' -f1 /proc/uptime)
    host_set_link "$ME" w1 on > /dev/null || { echo "the host did not set w1 on"; wait "$_job"; return 1; }
    wait "$_job"
    _t2=$(cut -d' ' -f1 /proc/uptime)
    [ "$(cat "/tmp/rc-$2")" = 0 ] || { echo "ADD failed: $(cat "/tmp/res-$2.json")"; return 1; }
    _st=$(rail_port_state "$1" "$2")
    _rail=$(kv "$PODS/uid-$2/rdma.env" RDMANET_RAIL0_STATE)
    echo "ADD from $_t0 to $_t2, wire up at $_t1; right after: port $_st, rail $_rail; $(log_since "$_mark" | grep -o 'net1 usable after .*' | cut -c1-120)"
    [ "$_st" = ACTIVE ] && [ "$_rail" = up ] && grep -q '"state": *"up"' "$PODS/uid-$2/rails.json"
}
# reported_down ISO POD CONF: with the wire down, ADD answers after portTimeout (3 s), 0, with
# the warning naming the port's state, and the pod's files say the rail is down.
reported_down() {
    _mark=$(wc -l < "$CNI_LOG")
    _t0=$(cut -d' ' -f1 /proc/uptime)
    POD_ARGS="IgnoreUnknown=1;K8S_POD_UID=uid-$2" cni ADD "$2" "$3" net1 > "/tmp/res-$2.json" ||
        { echo "ADD failed: $(cat "/tmp/res-$2.json")"; return 1; }
    _t1=$(cut -d' ' -f1 /proc/uptime)
    _warn=$(log_since "$_mark" | grep -o 'rail net1 is down: .*' | head -n 1)
    echo "ADD took $(awk -v a="$_t0" -v b="$_t1" 'BEGIN { printf "%.1f", b - a }') s; $_warn"
    echo "$_warn" | grep -q 'no carrier on net1, RDMA port rxe[0-9a-f]*/1 DOWN (physical state [A-Z_]*) after portTimeout 3 s' &&
        [ "$(kv "$PODS/uid-$2/rdma.env" RDMANET_RAIL0_STATE)" = down ] &&
        grep -q '"state": *"down"' "$PODS/uid-$2/rails.json" &&
        awk -v a="$_t0" -v b="$_t1" 'BEGIN { exit !(b - a >= 3) }'
}
# refused_and_rolled_back ISO POD CONF: with requireActive, ADD fails with 108 naming the port,
# and leaves the node as it was: w1 home, no soft-RoCE device, record or lease.
refused_and_rolled_back() {
    if POD_ARGS="IgnoreUnknown=1;K8S_POD_UID=uid-$2" cni ADD "$2" "$3" net1 > "/tmp/res-$2.json"; then
        echo "ADD succeeded with the wire down: $(cat "/tmp/res-$2.json")"; return 1
    fi
    _code=$(json_num code "/tmp/res-$2.json") _msg=$(json_str msg "/tmp/res-$2.json")
    echo "code $_code: $_msg"
    [ "$_code" = 108 ] && echo "$_msg" | grep -q 'no carrier on net1, RDMA port rxe[0-9a-f]*/1 DOWN' &&
        [ -e /sys/class/net/w1 ] && no_leftovers > /dev/null && no_rdma_links &&
        { [ "$1" != required ] || no_rdma_devices; }
}

# port_rule ISOLATION: (a) in this mode, on this node's end of w1.
port_rule() {
    _iso=$1 _pod=pa-$ME
    $IP netns add "$_pod"
    net_conf a-rail "$_iso" "$(node_ipam 10.79.1.0/24 "10.79.1.${NB}0" "10.79.1.${NB}9")" '"device": "w1", "portTimeout": 20' > /tmp/a-wait.json
    net_conf a-rail "$_iso" "$(node_ipam 10.79.1.0/24 "10.79.1.${NB}0" "10.79.1.${NB}9")" '"device": "w1", "portTimeout": 3' > /tmp/a-down.json
    net_conf a-rail "$_iso" "$(node_ipam 10.79.1.0/24 "10.79.1.${NB}0" "10.79.1.${NB}9")" '"device": "w1", "portTimeout": 2, "requireActive": true' > /tmp/a-strict.json
    require "$_iso-a-wire-off" host_set_link "$ME" w1 off
    check "$_iso-a-add-answers-once-the-port-is-active" added_after_link_up "$_iso" "$_pod" /tmp/a-wait.json
    check "$_iso-a-del" pod_del "$_pod" /tmp/a-wait.json net1
    require "$_iso-a-wire-off-again" host_set_link "$ME" w1 off
    check "$_iso-a-wire-down-reported-down" reported_down "$_iso" "$_pod" /tmp/a-down.json
    check "$_iso-a-del-down" pod_del "$_pod" /tmp/a-down.json net1
    check "$_iso-a-require-active-refused-and-rolled-back" refused_and_rolled_back "$_iso" "$_pod" /tmp/a-strict.json
    require "$_iso-a-wire-on" host_set_link "$ME" w1 on
    $IP netns del "$_pod"
    check "$_iso-a-nothing-left" sh -c '. /lab/lib.sh; no_leftovers && no_rdma_links'
    lab_time "${_iso}portrule"
}

require netns-mode-shared sh -c 'rdma system show | grep -q "netns shared"'
port_rule off
rdma_across off

# ---- (c) two rails in one subnet, each on its own wire ------------------------------------------

# counters POD: rx and tx packets of net1 and net2 in POD, one line.
counters() {
    for _i in net1 net2; do
        nsx "$1" cat "/sys/class/net/$_i/statistics/rx_packets" "/sys/class/net/$_i/statistics/tx_packets"
    done | tr '\n' ' '
}
# on_its_wire K BEFORE AFTER: between the two counter lines, rail K's interface (net<K+1>)
# sent and received at least 100 packets each way, the other rail's at most 10 (IPv6
# neighbour discovery and router solicitations may pass there meanwhile). Without rdmanet's
# rule for the rail's address, the 30 pings from it leave by the other rail (measured: the
# ping then fails, and rdma_cm's rping still takes its own wire, bound by its device).
on_its_wire() {
    echo "$2 $3" | awk -v k="$1" '{
        for (i = 1; i <= 4; i++) d[i] = $(i + 4) - $i
        own = k == 0 ? 1 : 3; other = k == 0 ? 3 : 1
        printf "net%d (rail %d, wire w%d): rx %d tx %d; net%d: rx %d tx %d\n", k + 1, k, k + 1, d[own], d[own + 1], 2 - k, d[other], d[other + 1]
        exit !(d[own] >= 100 && d[own + 1] >= 100 && d[other] <= 10 && d[other + 1] <= 10)
    }'
}
# rping_client SRC DST: rdma_cm's rping from address SRC to a server on DST (which may still be
# starting: retried), 50 round trips.
rping_client() {
    for _i in 1 2 3 4 5 6 7 8 9 10; do
        nsx "podc-$ME" timeout 30 rping -c -I "$1" -a "$2" -C 50 -v > /tmp/rping-client.log 2>&1 &&
            { tail -n 1 /tmp/rping-client.log; return 0; }
        sleep 0.5
    done
    tail -n 3 /tmp/rping-client.log
    return 1
}

two_rails() {
    _pod=podc-$ME _uid=uidc-$ME
    $IP netns add "$_pod"
    nsx "$_pod" "$IP" link set lo up
    for _k in 0 1; do
        net_conf "c-rail$_k" off "$(node_ipam 10.81.0.0/24 "10.81.0.$NB$((_k + 1))" "10.81.0.$NB$((_k + 1))")" \
            "\"device\": \"w$((_k + 1))\"" > "/tmp/c$_k.json"
    done
    barrier c-add
    require c-add-net1 pod_add "$_pod" /tmp/c0.json net1 "$_uid"
    require c-add-net2 pod_add "$_pod" /tmp/c1.json net2 "$_uid"
    _env=$PODS/$_uid/rdma.env
    lab_fact c-source-rules "$(nsx "$_pod" "$IP" rule show | tr '\n' ';')"
    require c-send-env peer_send c-env "$_env"
    require c-peer-env peer_wait c-env
    cp "$LAB_INBOX/c-env" /tmp/peer-c.env
    check c-one-subnet sh -c "[ \"\$(sed -n 's/^RDMANET_RAIL[01]_ADDRESS=\(10\.81\.0\)\..*/\1/p' $_env | sort -u)\" = 10.81.0 ] && grep '^RDMANET_RAIL[01]_ADDRESS=' $_env | tr '\n' ' '"
    lab_time cadded
    for _k in 0 1; do
        _mine=$(kv "$_env" "RDMANET_RAIL${_k}_ADDRESS") _peer=$(kv /tmp/peer-c.env "RDMANET_RAIL${_k}_ADDRESS")
        if [ "$ME" = b ]; then
            nsx "$_pod" timeout 60 rping -s -a "$_mine" -C 50 -v > /tmp/rping-server.log 2>&1 &
            _srv=$!
        fi
        _before=$(counters "$_pod")
        barrier "c$_k-go"
        if [ "$ME" = a ]; then
            check "c-rail$_k-ping-from-its-address" nsx "$_pod" ping -c 30 -i 0.05 -w 15 -I "$_mine" "$_peer"
            check "c-rail$_k-rping-from-its-address" rping_client "$_mine" "$_peer"
            peer_send "c$_k-done"
        else
            _rc=0; wait "$_srv" || _rc=$?
            check "c-rail$_k-rping-server" rc_ok "$_rc" /tmp/rping-server.log
            peer_wait "c$_k-done" 60 || true
        fi
        check "c-rail$_k-traffic-on-wire-w$((_k + 1))-only" on_its_wire "$_k" "$_before" "$(counters "$_pod")"
    done
    lab_time crails
    barrier c-done
    check c-del-net2 pod_del "$_pod" /tmp/c1.json net2
    check c-del-net1 pod_del "$_pod" /tmp/c0.json net1
    $IP netns del "$_pod"
    check c-nothing-left sh -c '. /lab/lib.sh; no_leftovers && no_rdma_links'
}
two_rails

# ---- (d) cluster IPAM across the nodes ----------------------------------------------------------

ETCD=http://192.168.77.1:2379
BLOCKS=/rdmanet/ipam/cluster0/blocks/
# blocks: "BLOCK NODE" per block etcd holds for network cluster0 (read from node a).
blocks() {
    etcdctl --endpoints "$ETCD" get --prefix "$BLOCKS" | awk -v p="$BLOCKS" '
        index($0, p) == 1 { b = substr($0, length(p) + 1); next }
        b != "" { n = $0; sub(/.*"node": *"/, "", n); sub(/".*/, "", n); print b, n; b = "" }'
}
# owner_of ADDR: the node whose block holds ADDR ("" when none).
owner_of() {
    blocks | awk -v a="$1" '
        function num(ip,  p) { split(ip, p, "."); return ((p[1] * 256 + p[2]) * 256 + p[3]) * 256 + p[4] }
        { split($1, b, "_"); lo = num(b[1]); size = 1; for (i = b[2]; i < 32; i++) size *= 2; hi = lo + size - 1
          if (num(a) >= lo && num(a) <= hi) print $2 }'
}
# owned_by_node ADDR NODE: etcd gives the block holding ADDR to NODE.
owned_by_node() {
    _o=$(owner_of "$1")
    echo "$1: block of ${_o:-nobody}"
    [ "$_o" = "$2" ]
}
# only_node_a_blocks: etcd holds blocks of node-a and none of node-b.
only_node_a_blocks() {
    _b=$(blocks)
    echo "blocks: $(echo "$_b" | tr '\n' ';')"
    ! echo "$_b" | grep -q ' node-b$' && echo "$_b" | grep -q ' node-a$'
}
# etcd_up: etcd answers on node a's control address (60 s; its log when it does not).
etcd_up() {
    timeout 60 sh -c "until etcdctl --endpoints $ETCD --command-timeout 5s endpoint health; do sleep 0.5; done" 2>&1 | tail -n 1
    etcdctl --endpoints "$ETCD" --command-timeout 5s endpoint health > /dev/null 2>&1 || { tail -n 5 /tmp/etcd.log; return 1; }
}
pci_of() { basename "$(readlink "/sys/class/net/$1/device")"; }
d_add() { # POD WIRE: ADD of pod POD with the NIC of WIRE as the device plugin names it
    net_conf cluster0 off "$D_IPAM" "\"runtimeConfig\": {\"deviceID\": \"$(pci_of "$2")\"}" > "/tmp/d-$1.json"
    $IP netns add "$1"
    pod_add "$1" "/tmp/d-$1.json" net1 "uid-$1"
}
d_addr() { json_str address "/tmp/res-$1-net1.json" | sed 's|/.*||'; }
d_del() { pod_del "$1" "/tmp/d-$1.json" net1 && $IP netns del "$1"; }

cluster_ipam() {
    echo "node-$ME" > /run/rdmanet-node-name
    D_IPAM="{\"type\": \"rdmanet-ipam\", \"dataDir\": \"$CNI_IPAM\", \"ranges\": [[{\"subnet\": \"10.82.0.0/24\"}]],
      \"cluster\": {\"blockSize\": 28, \"releaseAfter\": 0, \"nodeNameFile\": \"/run/rdmanet-node-name\",
                  \"etcd\": {\"endpoints\": [\"$ETCD\"], \"timeout\": 10}}}"
    [ "$ME" = b ] || require d-etcd-up etcd_up
    barrier d-add
    # Two pods per node at once, as a node starts them (node b's claims go over the wire).
    (d_add "pd1-$ME" w1 > /tmp/d-add-1.log 2>&1; echo $? > /tmp/d-add-1.rc) &
    _j1=$!
    (d_add "pd2-$ME" w2 > /tmp/d-add-2.log 2>&1; echo $? > /tmp/d-add-2.rc) &
    _j2=$!
    wait "$_j1" "$_j2" || true
    require d-add-pod1 sh -c 'cat /tmp/d-add-1.log; [ "$(cat /tmp/d-add-1.rc)" = 0 ]'
    require d-add-pod2 sh -c 'cat /tmp/d-add-2.log; [ "$(cat /tmp/d-add-2.rc)" = 0 ]'
    echo "$(d_addr "pd1-$ME") $(d_addr "pd2-$ME")" > /tmp/d-addrs
    require d-send-addrs peer_send d-addrs /tmp/d-addrs
    require d-peer-addrs peer_wait d-addrs
    read -r _my1 _my2 < /tmp/d-addrs
    read -r _p1 _p2 < "$LAB_INBOX/d-addrs"
    lab_fact d-addresses "node $ME: $_my1 $_my2; node $LAB_PEER: $_p1 $_p2"
    check d-distinct-addresses sh -c "n=\$(printf '%s\n' $_my1 $_my2 $_p1 $_p2 | grep -c '^10\.82\.0\.'); u=\$(printf '%s\n' $_my1 $_my2 $_p1 $_p2 | sort -u | wc -l);
        echo \"\$u distinct of \$n in 10.82.0.0/24\"; [ \$n -eq 4 ] && [ \$u -eq 4 ]"
    barrier d-ready
    check d-reach-across-w1 nsx "pd1-$ME" ping -c 3 -w 10 "$_p1"
    if [ "$ME" = a ]; then
        lab_fact d-blocks "$(blocks | tr '\n' ';')"
        for _x in "$_my1 node-a" "$_my2 node-a" "$_p1 node-b" "$_p2 node-b"; do
            # shellcheck disable=SC2086 # address and node
            check "d-block-of-${_x% *}" owned_by_node $_x
        done
        peer_send d-checked
        require d-node-b-deleted peer_wait d-deleted 120
        check d-node-b-blocks-given-back only_node_a_blocks
        peer_send d-release-checked
        require d-node-b-readded peer_wait d-readded 120
        _new=$(cat "$LAB_INBOX/d-readded")
        check d-new-pod-on-b-gets-an-address owned_by_node "$_new" node-b
        lab_fact d-new-address "$_new (node b's pods had $_p1 $_p2)"
        peer_send d-readd-checked
        check d-del-pod1 d_del "pd1-$ME"
        check d-del-pod2 d_del "pd2-$ME"
        require d-node-b-done peer_wait d-b-done 120
        check d-no-block-left sh -c "b=\$(etcdctl --endpoints $ETCD get --prefix $BLOCKS --keys-only | grep -c .); echo \"\$b keys under $BLOCKS\"; [ \$b -eq 0 ]"
    else
        require d-node-a-checked peer_wait d-checked 120
        check d-del-pod1 d_del "pd1-$ME"
        check d-del-pod2 d_del "pd2-$ME"
        check d-no-lease-left sh -c '. /lab/lib.sh; no_leftovers'
        peer_send d-deleted
        require d-release-checked peer_wait d-release-checked 120
        require d-readd d_add "pd3-$ME" w1
        d_addr "pd3-$ME" > /tmp/d-new
        peer_send d-readded /tmp/d-new
        peer_wait d-readd-checked 120 || true
        check d-del-pod3 d_del "pd3-$ME"
        peer_send d-b-done
    fi
    check d-nothing-left sh -c '. /lab/lib.sh; no_leftovers && no_rdma_links'
}
cluster_ipam
lab_time cluster

# ---- (b) again, exclusive mode: each pod's device moved into it ----------------------------------
# The kernel switches modes only while no netns but the initial one exists (all are gone).
# Namespace teardown is asynchronous: the last pod's netns may take a moment to be gone.
to_exclusive() {
    wait_for 20 rdma system set netns exclusive && return 0
    _init=$(readlink /proc/1/ns/net)
    for _p in /proc/[0-9]*; do
        _n=$(readlink "$_p/ns/net" 2>/dev/null) || continue
        [ "$_n" = "$_init" ] || echo "${_p#/proc/} $_n $(tr '\0' ' ' < "$_p/cmdline" | cut -c1-60)"
    done | head -n 5
    echo "netns: $($IP netns list | tr '\n' ' ')"
    return 1
}
require netns-mode-exclusive to_exclusive
port_rule required
rdma_across required
barrier end
