#!/bin/sh
# lab-kernel: 7.3
# lab-cmdline:
# lab-workloads: ucx-mpi
# The seed's stack on rdmanet's rails: UCX 1.13 and Open MPI 4.1 from Debian 12 (the image's
# workloads archive), two pods with two soft-RoCE rails each, named net1 and net2 as Multus
# names them, roce.tos 72, attached through the CNI protocol with pod files on. Each pod's
# programs run in its netns (own sysfs), their own UTS name, and only that pod's files mounted
# at /run/rdmanet/pod as the workloads mount them, with UCX_CONFIG_DIR naming them and no
# device named by hand. Establishes, in shared mode and again with rdmaIsolation "required"
# (each pod's devices moved into it): ucx_info -d lists each pod's own devices with rc_verbs
# and ud_verbs (rdmanet's soft-RoCE names fit UCX's 15 characters); ucx_perftest between the
# pods takes the rails from ucx.conf alone and sends every RoCE v2 packet with the NAD's class
# (tos 0x48); a large-message run moves data on both rails (UCX stripes rendezvous over two
# devices); Open MPI with the seed's flags (`--mca pml ucx`) runs MPI_Allreduce over two ranks,
# one per pod, the remote rank started in the other pod's namespaces as ssh would start it on
# another node, with the right sum on both ranks and each rank's UCX lanes on its own pod's
# devices. Both pods share one kernel, so UCX_TLS keeps UCX to the verbs transports (it would
# take shared memory between them otherwise). Also: a soft-RoCE device recorded under the name
# rdmanet 0.1 gave (before an upgrade) is still deleted by DEL.
set -eu
. /lab/lib.sh
export CNI_STATE=/run/rdmanet-state
PODS=/run/rdmanet/pods
TOS=72
TLS=self,rc_verbs,ud_verbs

lab_fact kernel "$(uname -r)"
require workloads-in-image sh -c 'command -v ucx_info && command -v mpirun && [ -x /opt/lab/allreduce ]'
lab_fact ucx "$(ucx_info -v 2>&1 | head -n1)"
lab_fact openmpi "$(mpirun --allow-run-as-root --version 2>&1 | head -n1)"
mkdir -p /opt/pod

rail_net() { # K DEVICE ISOLATION
    cat <<JSON
{"cniVersion": "1.1.0", "name": "rail$1", "type": "rdmanet", "device": "$2",
 "softRoce": true, "rdmaIsolation": "$3", "gidTimeout": 20, "stateDir": "$CNI_STATE",
 "podInfoDir": "$PODS", "roce": {"tos": $TOS}, "logFile": "$CNI_LOG", "logLevel": "info",
 "ipam": {"type": "rdmanet-ipam", "dataDir": "$CNI_IPAM",
          "ranges": [[{"subnet": "10.62.$1.0/24", "rangeStart": "10.62.$1.10"}]]}}
JSON
}

# attach_pods ISOLATION: pods a and b, each with net1 and net2 (rails 0 and 1 over veth pairs).
attach_pods() {
    $IP netns add pod-a
    $IP netns add pod-b
    # As the runtime's loopback plugin leaves every pod: lo up (a process reaching its own
    # rail address goes through it; Open MPI's PMIx server does).
    nsx pod-a $IP link set lo up
    nsx pod-b $IP link set lo up
    for k in 0 1; do
        $IP link add "ra$k" type veth peer name "rb$k" 2>/dev/null || true
        $IP link set "rb$k" up # the wire's far end: pod-a's rail has carrier (ADD waits for it)
        rail_net "$k" "ra$k" "$1" > "/tmp/a$k.json"
        rail_net "$k" "rb$k" "$1" > "/tmp/b$k.json"
    done
    for side in a b; do
        for k in 0 1; do
            POD_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=worker-$side;K8S_POD_UID=uid-$side"
            require "$1-add-pod-$side-net$((k + 1))" sh -c ". /lab/lib.sh; POD_ARGS='$POD_ARGS' cni ADD pod-$side /tmp/$side$k.json net$((k + 1)) > /tmp/res-$side$k.json"
        done
    done
    POD_ARGS=""
}
detach_pods() { # ISOLATION
    for side in a b; do
        for k in 0 1; do
            check "$1-del-pod-$side-net$((k + 1))" sh -c ". /lab/lib.sh; cni DEL pod-$side /tmp/$side$k.json net$((k + 1))"
        done
    done
    $IP netns del pod-a
    $IP netns del pod-b
}
envval() { sed -n "s/^$2=//p" "$PODS/uid-$1/rdma.env"; }

# in_pod: lib.sh's.

# The remote shell mpirun uses (plm_rsh_agent): "pod-rsh [options] HOST COMMAND": COMMAND in
# the pod whose rail address HOST is, as ssh would run it on that pod's node: from the node's
# namespaces (PID 1's), never from the calling pod's.
write_rsh_agent() {
    cat > /tmp/pod-rsh <<EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
case "\$1" in
    $(envval a RDMANET_RAIL0_ADDRESS)|pod-a) side=a ;;
    $(envval b RDMANET_RAIL0_ADDRESS)|pod-b) side=b ;;
    *) echo "pod-rsh: no pod has address \$1" >&2; exit 255 ;;
esac
shift
exec nsenter -t 1 -m -u -n sh -c '. /lab/lib.sh; in_pod "\$0" sh -c "\$1"' "\$side" "\$*"
EOF
    chmod 755 /tmp/pod-rsh
}

# ucx_sees SIDE [OTHER]: ucx_info -d in pod SIDE lists each of its rails' devices (rdma.env)
# with rc_verbs and ud_verbs; with OTHER, none of pod OTHER's devices.
ucx_sees() {
    in_pod "$1" ucx_info -d > "/tmp/ucx-info-$1" 2>&1 || { tail -n 5 "/tmp/ucx-info-$1"; return 1; }
    _pairs=$(awk '/Transport:/ { t = $3 } /Device:/ { print t, $3 }' "/tmp/ucx-info-$1")
    for _i in 0 1; do
        _dev=$(envval "$1" "RDMANET_RAIL${_i}_RDMA_DEVICE")
        [ -n "$_dev" ] || { echo "no RDMANET_RAIL${_i}_RDMA_DEVICE in pod-$1's rdma.env"; return 1; }
        for _tl in rc_verbs ud_verbs; do
            echo "$_pairs" | grep -qx "$_tl $_dev:1" ||
                { echo "no $_tl on $_dev:1 in pod-$1's ucx_info -d: $(echo "$_pairs" | tr '\n' ';')"; return 1; }
        done
    done
    if [ -n "${2:-}" ]; then
        for _i in 0 1; do
            _dev=$(envval "$2" "RDMANET_RAIL${_i}_RDMA_DEVICE")
            ! echo "$_pairs" | grep -q " $_dev:" || { echo "pod-$1 sees pod-$2's $_dev"; return 1; }
        done
    fi
    echo "pod-$1: $(echo "$_pairs" | grep -c _verbs) verbs resources on $(envval "$1" RDMANET_RAIL0_RDMA_DEVICE), $(envval "$1" RDMANET_RAIL1_RDMA_DEVICE)"
}

# perftest NAME ARGS...: ucx_perftest server in pod-b, client in pod-a with ARGS, both with
# UCX_TLS only from the command line's environment and everything else from ucx.conf.
perftest() {
    _name=$1; shift
    _t0=$(cut -d' ' -f1 /proc/uptime)
    in_pod b env UCX_TLS=$TLS timeout 120 ucx_perftest -p 13337 > "/tmp/pt-$_name-server.log" 2>&1 &
    _srv=$!
    # It listens on TCP 13337 (0x3419), IPv4 or IPv6 (state 0A = LISTEN).
    if ! wait_for 30 sh -c "$IP netns exec pod-b cat /proc/net/tcp /proc/net/tcp6 | awk '\$2 ~ /:3419\$/ && \$4 == \"0A\" { f = 1 } END { exit !f }'"; then
        echo "perftest server not listening after 30 s: $(tail -n 3 "/tmp/pt-$_name-server.log")"
        kill "$_srv" 2>/dev/null; wait "$_srv"; return 1
    fi
    _t1=$(cut -d' ' -f1 /proc/uptime)
    _rc=0
    in_pod a env UCX_TLS=$TLS timeout 120 ucx_perftest "$(envval b RDMANET_RAIL0_ADDRESS)" -p 13337 "$@" \
        > "/tmp/pt-$_name.log" 2>&1 || _rc=$?
    _t2=$(cut -d' ' -f1 /proc/uptime)
    wait "$_srv" || _rc=$((_rc + 100))
    echo "uptime: start $_t0, server listening $_t1, client done $_t2, server done $(cut -d' ' -f1 /proc/uptime)"
    tail -n 2 "/tmp/pt-$_name.log"
    [ "$_rc" -eq 0 ] || { echo "rc $_rc; server: $(tail -n 5 "/tmp/pt-$_name-server.log")"; }
    return "$_rc"
}

rx() { nsx pod-b cat "/sys/class/net/$1/statistics/rx_packets"; }

# allreduce ISOLATION: the seed's launch, one rank per pod; every rank's sum right, and the
# UCX lanes each rank reports (UCX_LOG_LEVEL=info: "ep_cfg[..]: tag(rc_verbs/<dev>:1 ...)")
# only on its own pod's devices.
allreduce() {
    printf '%s slots=1\n%s slots=1\n' "$(envval a RDMANET_RAIL0_ADDRESS)" \
        "$(envval b RDMANET_RAIL0_ADDRESS)" > /tmp/hosts
    write_rsh_agent
    _rc=0
    in_pod a timeout 150 mpirun --allow-run-as-root -np 2 --hostfile /tmp/hosts --tag-output \
        --mca plm_rsh_agent /tmp/pod-rsh --mca oob_tcp_if_include net1 \
        --mca pml ucx --mca btl '^vader,tcp,openib' \
        -x UCX_CONFIG_DIR -x UCX_TLS=$TLS -x UCX_LOG_LEVEL=info \
        /opt/lab/allreduce > "/tmp/mpi-$1.log" 2>&1 || _rc=$?
    if [ "$_rc" -ne 0 ]; then
        sed 's/^/LAB-LOG mpirun| /' "/tmp/mpi-$1.log" > /dev/console
        echo "mpirun rc $_rc: $(tail -n 8 "/tmp/mpi-$1.log")"; return 1
    fi
    for _r in 0 1; do
        grep -q "^\[1,$_r\]<stdout>:allreduce rank $_r of 2 on pod-.*, 0 wrong$" "/tmp/mpi-$1.log" ||
            { echo "rank $_r: $(grep "^\[1,$_r\]" "/tmp/mpi-$1.log" | grep allreduce)"; return 1; }
    done
    grep '<stdout>:allreduce' "/tmp/mpi-$1.log" | sed 's/.*<stdout>://' | tr '\n' ';'
}
lanes_own() { # ISOLATION: rank 0 runs in pod-a, rank 1 in pod-b
    for _r in 0 1; do
        _side=$([ "$_r" -eq 0 ] && echo a || echo b)
        _other=$([ "$_r" -eq 0 ] && echo b || echo a)
        _lanes=$(grep "^\[1,$_r\]" "/tmp/mpi-$1.log" | grep -o '_verbs/[A-Za-z0-9_.-]*:1' | sort -u | tr '\n' ' ')
        [ -n "$_lanes" ] || { echo "rank $_r reported no verbs lanes: $(grep "^\[1,$_r\]" "/tmp/mpi-$1.log" | grep -i ucx | tail -n 3)"; return 1; }
        for _l in $_lanes; do
            _d=${_l#_verbs/}; _d=${_d%:1}
            [ "$_d" = "$(envval $_side RDMANET_RAIL0_RDMA_DEVICE)" ] || [ "$_d" = "$(envval $_side RDMANET_RAIL1_RDMA_DEVICE)" ] ||
                { echo "rank $_r (pod-$_side) has a lane on $_d, not its own (pod-$_other's?)"; return 1; }
        done
        echo "rank $_r: $_lanes"
    done
}

# run_workloads ISOLATION [exclusive]: what the workloads see and do. In exclusive mode
# (devices moved into the pods) what changes is which devices a pod sees: ucx_info and the
# MPI job run again; the perftests, whose rails and class come from the same files, do not.
run_workloads() {
    _iso=$1
    check "$_iso-ucx-info-pod-a" ucx_sees a ${2:+b}
    check "$_iso-ucx-info-pod-b" ucx_sees b ${2:+a}
    lab_time "${_iso}info"
    if [ -z "${2:-}" ]; then
        # Small messages (eager, UD wire-up then RC): every RoCE v2 packet pod-a sends on its
        # rails with the NAD's class. Without ucx.conf UCX would send 0x6a (its default, 106).
        nsx pod-a timeout 90 tcpdump -Z root -l -n -v -Q out -i any -c 40 udp port 4791 > /tmp/tc.log 2>&1 &
        _dump=$!
        check "$_iso-tcpdump-listening" wait_for 30 grep -q 'listening on' /tmp/tc.log
        check "$_iso-perftest-small" perftest small -t tag_lat -s 64 -n 2000
        wait "$_dump" || true
        lab_time "${_iso}dump"
        check "$_iso-tos-on-wire" all_packets_with_tos /tmp/tc.log "$TOS" 10 "from pod-a, roce.tos $TOS"
        before1=$(rx net1) before2=$(rx net2)
        check "$_iso-perftest-large" perftest large -t tag_bw -s 4194304 -n 8
        after1=$(rx net1) after2=$(rx net2)
        check "$_iso-large-on-both-rails" sh -c "d1=\$(($after1 - $before1)) d2=\$(($after2 - $before2));
            echo \"pod-b received \$d1 packets on net1, \$d2 on net2\"; [ \$d1 -ge 2000 ] && [ \$d2 -ge 2000 ]"
        lab_time "${_iso}perftest"
    fi
    check "$_iso-mpi-allreduce" allreduce "$_iso"
    check "$_iso-mpi-lanes-own-devices" lanes_own "$_iso"
    lab_time "${_iso}mpi"
}

# ---- shared mode ---------------------------------------------------------------------------
require netns-mode-shared sh -c 'rdma system show | grep -q "netns shared"'
attach_pods off
lab_time attached
show "pod-a's ucx.conf, as rdmanet wrote it:"
sed 's/^/DEMO|   /' "$PODS/uid-a/ucx.conf"
check ucx-conf-names-the-rails sh -c "grep -qx 'UCX_NET_DEVICES=$(envval a RDMANET_RAIL0_RDMA_DEVICE):1,$(envval a RDMANET_RAIL1_RDMA_DEVICE):1' $PODS/uid-a/ucx.conf &&
    grep -qx 'UCX_IB_TRAFFIC_CLASS=$TOS' $PODS/uid-a/ucx.conf && grep -qx 'UCX_UD_VERBS_ETH_DGID_CHECK=n' $PODS/uid-a/ucx.conf &&
    grep -q '^# UCX_UD_VERBS_ETH_DGID_CHECK=n: .*(rxe)' $PODS/uid-a/ucx.conf && echo 'devices, class and the UD setting, with why'"
check device-names-fit-ucx sh -c "for d in $(envval a RDMANET_RAIL0_RDMA_DEVICE) $(envval b RDMANET_RAIL1_RDMA_DEVICE); do
    [ \${#d} -le 15 ] || { echo \"\$d: \${#d} characters\"; exit 1; }; done; echo 'at most 15 characters'"
run_workloads shared

# An attachment recorded before an upgrade names its soft-RoCE device as rdmanet 0.1 did:
# rxe_<ifname>_<hash> (plugin/steps/soft_roce_test.cc pins this one). DEL still deletes it.
legacy_device_deleted() {
    _new=$(envval a RDMANET_RAIL0_RDMA_DEVICE) _old=rxe_net1_eace3a0a
    _rec=$(grep -l '"ctr-pod-a"' "$CNI_STATE"/rail0/*.json 2>/dev/null | head -n1)
    [ -n "$_rec" ] || { echo "no record of ctr-pod-a in $CNI_STATE/rail0"; return 1; }
    rdma link delete "$_new" || return 1
    nsx pod-a rdma link add "$_old" type rxe netdev net1 || return 1
    sed -i "s/$_new/$_old/g" "$_rec"
    cni DEL pod-a /tmp/a0.json net1 > /tmp/res.json || { cat /tmp/res.json; return 1; }
    rdma_devices_absent "$_old"
}
check upgrade-legacy-device-deleted legacy_device_deleted
check upgrade-readd sh -c ". /lab/lib.sh; POD_ARGS='IgnoreUnknown=1;K8S_POD_UID=uid-a' cni ADD pod-a /tmp/a0.json net1 > /tmp/res-a0.json"
detach_pods shared
check shared-nothing-left sh -c '. /lab/lib.sh; no_leftovers && no_rdma_links'

# ---- exclusive mode: each pod's devices moved into it -------------------------------------
# The kernel switches modes only while no netns but the initial one exists (all are gone).
require netns-mode-exclusive rdma system set netns exclusive
attach_pods required
check required-each-pod-sees-its-own sh -c ". /lab/lib.sh; for s in a b; do
    n=\$($IP netns exec pod-\$s rdma dev show | wc -l); [ \$n -eq 2 ] || { echo \"pod-\$s sees \$n devices\"; exit 1; }; done;
    no_rdma_devices && echo 'two devices in each pod, none in the host'"
run_workloads required exclusive
detach_pods required
check required-nothing-left sh -c '. /lab/lib.sh; no_leftovers && no_rdma_devices'
