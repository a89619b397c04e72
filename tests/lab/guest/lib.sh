# shellcheck shell=sh
# Helpers for guest scenario scripts (sourced; busybox ash).
# Report lines, parsed by run.sh on the host:
#   LAB-RESULT name=N status=pass|fail detail=TEXT   one check
#   LAB-FACT key=value                               a measured fact
#   LAB-TIME stage=S uptime=SECONDS                  progress timing
#   LAB-DONE scenario=S rc=N                         the guest finished

# busybox ash runs its own `ip` and `tc` applets before anything in PATH:
# always call iproute2 by its full path.
IP=/usr/sbin/ip

# One line each, whatever the detail holds.
_oneline() { printf '%s' "$*" | tr -s '\n\r\t ' ' ' | cut -c1-400; }

lab_result() { # NAME pass|fail DETAIL...
    _n=$1 _s=$2; shift 2
    [ "$_s" = pass ] || : > /tmp/lab-failed
    echo "LAB-RESULT name=$_n status=$_s detail=$(_oneline "$*")"
}
lab_fact() { echo "LAB-FACT $1=$(_oneline "$2")"; }
lab_time() { echo "LAB-TIME stage=$1 uptime=$(cut -d' ' -f1 /proc/uptime)"; }

# check NAME CMD...: pass when CMD exits 0; the detail is its last output line
# (or, on failure, its exit code and last lines). Never fails itself, so a
# failed check does not end a `set -e` scenario; LAB_LAST says how it went.
check() {
    _n=$1; shift
    if _out=$("$@" 2>&1); then
        LAB_LAST=pass
        lab_result "$_n" pass "$(printf '%s\n' "$_out" | tail -n1)"
    else
        _rc=$?
        LAB_LAST=fail
        lab_result "$_n" fail "rc=$_rc: $(printf '%s\n' "$_out" | tail -n4)"
    fi
}
# require NAME CMD...: like check, but the scenario cannot go on without it.
require() { check "$@"; [ "$LAB_LAST" = pass ] || exit 1; }

# nsx NS CMD...: run CMD inside network namespace NS.
nsx() { _ns=$1; shift; "$IP" netns exec "$_ns" "$@"; }

# two_pods_on_veth [IF_A IF_B]: netns a and b joined by a veth pair (IF_A,
# IF_B; default va, vb), 10.0.0.1/24 on IF_A in a and 10.0.0.2/24 on IF_B in
# b, everything up.
two_pods_on_veth() {
    _ia=${1:-va} _ib=${2:-vb}
    $IP netns add a
    $IP netns add b
    $IP link add "$_ia" type veth peer name "$_ib"
    $IP link set "$_ia" netns a
    $IP link set "$_ib" netns b
    nsx a $IP addr add 10.0.0.1/24 dev "$_ia"
    nsx b $IP addr add 10.0.0.2/24 dev "$_ib"
    for ns in a b; do nsx $ns $IP link set lo up; done
    nsx a $IP link set "$_ia" up
    nsx b $IP link set "$_ib" up
}

# wait_for SECONDS CMD...: poll CMD every 0.2 s until it succeeds.
wait_for() {
    _t=$(( $1 * 5 )); shift
    while [ "$_t" -gt 0 ]; do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2; _t=$((_t - 1))
    done
    return 1
}

# roce_v2_gid_index NS DEV IPV4: index of the RoCE v2 GID ::ffff:IPV4 on port 1
# of DEV, as a process in NS sees it (through uverbs, so it works in both
# netns modes). Prints nothing when absent.
roce_v2_gid_index() {
    nsx "$1" ibv_devinfo -v -d "$2" 2>/dev/null |
        awk -v want="::ffff:$3" '/GID\[/ && index($0, want ",") && /RoCE v2/ {
            sub(/.*GID\[ */, ""); sub(/\].*/, ""); print; exit }'
}

# pingpong NS_SRV DEV_SRV GID_SRV NS_CLI DEV_CLI GID_CLI SERVER_IP ITERS:
# ibv_rc_pingpong server in NS_SRV, client in NS_CLI. Prints the client output
# (also kept in /tmp/pp-client.log).
pingpong() {
    nsx "$1" timeout 60 ibv_rc_pingpong -d "$2" -g "$3" -n "$8" > /tmp/pp-server.log 2>&1 &
    _srv=$!
    # The server listens on TCP 18515 (0x4853) for the QP exchange; wait for
    # it (state 0A = LISTEN, IPv4 or IPv6; an earlier run's TIME_WAIT entry
    # does not count) instead of sleeping a guessed time.
    wait_for 30 sh -c "$IP netns exec $1 cat /proc/net/tcp /proc/net/tcp6 | awk '\$2 ~ /:4853\$/ && \$4 == \"0A\" { f = 1 } END { exit !f }'" ||
        echo "server not listening after 30 s: $(cat /tmp/pp-server.log)"
    _rc=0
    nsx "$4" timeout 60 ibv_rc_pingpong -d "$5" -g "$6" -n "$8" "$7" > /tmp/pp-client.log 2>&1 || _rc=$?
    cat /tmp/pp-client.log
    wait "$_srv" || _rc=$((_rc + 100))
    [ "$_rc" -eq 0 ] || { echo "server:"; cat /tmp/pp-server.log; }
    return "$_rc"
}

# rping_between NS_SRV SERVER_IP NS_CLI: rdma_cm traffic, 10 rping round trips between a
# server in NS_SRV on SERVER_IP and a client in NS_CLI (which retries while the server
# starts). Both must succeed; prints the client's last lines (logs in /tmp/rping-*.log).
rping_between() {
    nsx "$1" timeout 60 rping -s -a "$2" -C 10 -v > /tmp/rping-server.log 2>&1 &
    _srv=$!
    _rc=1
    for _i in 1 2 3 4 5 6 7 8 9 10; do
        nsx "$3" timeout 30 rping -c -a "$2" -C 10 -v > /tmp/rping-client.log 2>&1 && { _rc=0; break; }
        sleep 0.5
    done
    [ "$_rc" -eq 0 ] || kill "$_srv" 2>/dev/null
    wait "$_srv" || _rc=$((_rc + 100))
    tail -n 2 /tmp/rping-client.log
    [ "$_rc" -eq 0 ] || { echo "rc $_rc; server:"; cat /tmp/rping-server.log; }
    return "$_rc"
}

# all_packets_with_tos LOG TOS MIN [WHAT]: every RoCE v2 packet in LOG (tcpdump -v: its
# "proto UDP" lines) carries IP ToS TOS, and there are at least MIN of them.
all_packets_with_tos() {
    _n=$(grep -c 'proto UDP' "$1" || true)
    _t=$(grep 'proto UDP' "$1" | grep -c "tos 0x$(printf %x "$2")" || true)
    echo "$_t of $_n RoCE v2 packets with tos 0x$(printf %x "$2")${4:+ ($4)}"
    [ "$_n" -ge "$3" ] && [ "$_t" -eq "$_n" ]
}

# in_pod SIDE CMD...: CMD as a workload of pod-SIDE runs: in its netns (ip netns exec: own
# mount namespace and sysfs), its own host name, rdmanet's podInfoDir ($PODS) hidden and only
# the pod's directory (uid-SIDE) mounted at /run/rdmanet/pod, UCX_CONFIG_DIR naming it (the
# templates' env). A remote shell runs it too: `. /lab/lib.sh; in_pod ...`.
PODS=${PODS:-/run/rdmanet/pods}
in_pod() {
    _side=$1; shift
    $IP netns exec "pod-$_side" unshare -u sh -c 'hostname "pod-$0" && mount --bind "$1/uid-$0" /opt/pod &&
        mount -t tmpfs none /run/rdmanet && mkdir /run/rdmanet/pod && shift &&
        mount --bind /opt/pod /run/rdmanet/pod && exec env UCX_CONFIG_DIR=/run/rdmanet/pod "$@"' "$_side" "$PODS" "$@"
}

# --- driving rdmanet through the CNI protocol, as a container runtime does -----

CNI_BIN=/opt/cni/bin
# A scenario may put them elsewhere (exported, so `sh -c ". /lab/lib.sh; ..."` keeps them).
CNI_STATE=${CNI_STATE:-/run/rdmanet-state}
CNI_IPAM=${CNI_IPAM:-/run/rdmanet-ipam}
CNI_LOG=${CNI_LOG:-/tmp/rdmanet.log}

# rail_conf DEVICE [EXTRA_JSON_MEMBERS]: a network config (one RDMA rail) for
# the pod that gets DEVICE, with soft-RoCE and rdmanet-ipam.
rail_conf() {
    cat <<JSON
{
  "cniVersion": "1.1.0",
  "name": "rail0",
  "type": "rdmanet",
  "device": "$1",
  "softRoce": true,
  "gidTimeout": 20,
  "stateDir": "$CNI_STATE",
  "logFile": "$CNI_LOG",
  "logLevel": "info"${2:+,
  $2},
  "ipam": {"type": "rdmanet-ipam", "dataDir": "$CNI_IPAM",
           "ranges": [[{"subnet": "10.56.0.0/24", "rangeStart": "10.56.0.10"}]]}
}
JSON
}

# cni COMMAND POD CONF_FILE [IFNAME]: calls rdmanet for pod POD (netns POD,
# container id ctr-POD); the result goes to stdout, the exit code is rdmanet's.
# CNI_ARGS is $POD_ARGS (empty unless set).
cni() {
    CNI_COMMAND=$1 CNI_CONTAINERID="ctr-$2" CNI_NETNS="/run/netns/$2" CNI_ARGS="${POD_ARGS:-}" \
        CNI_IFNAME=${4:-net1} CNI_PATH=$CNI_BIN "$CNI_BIN/rdmanet" < "$3"
}

# check_conf CONF_FILE RESULT_FILE: the config a runtime sends with CHECK: the network
# config (one object, its closing brace alone on the last line, as rail_conf writes it)
# with the ADD's result as prevResult, so CHECK compares the pod with what ADD reported.
check_conf() {
    sed '$d' "$1"
    printf ', "prevResult": %s\n}\n' "$(cat "$2")"
}

# json_str KEY FILE: the first string value of KEY in a JSON file (enough for
# CNI results and error replies; busybox has no JSON tool).
json_str() {
    grep -o "\"$1\": *\"\([^\"\\]\|\\\\.\)*\"" "$2" | head -n1 | sed 's/^[^:]*: *"//; s/"$//; s/\\"/"/g'
}
json_num() { grep -o "\"$1\": *[0-9-]*" "$2" | head -n1 | sed 's/.*: *//'; }

# pod_rdma_dev POD: the RDMA device whose port netdev is net1, as POD sees it.
pod_rdma_dev() {
    nsx "$1" rdma link show | awk '/netdev net1( |$)/ { sub(/\/.*/, "", $2); print $2; exit }'
}

# reported_gid_index DEV: the RoCE v2 GID index rdmanet logged for DEV.
reported_gid_index() {
    grep "RDMA $1 in " "$CNI_LOG" | tail -n1 | sed -n 's/.*RoCE v2 GID index \([0-9-]*\).*/\1/p'
}

# no_leftovers: no attachment state and no IPAM lease is left behind.
no_leftovers() {
    _s=$(find "$CNI_STATE" -name '*.json' 2>/dev/null | wc -l)
    _l=$(find "$CNI_IPAM" -path '*leases/*' -type f 2>/dev/null | wc -l)
    echo "state files: $_s, leases: $_l"
    [ "$_s" -eq 0 ] && [ "$_l" -eq 0 ]
}

# readd_behind NS IF DEV ADDR DECOY PLEN [flap]: the pod takes IF's global addresses away
# (with "flap": while IF is down, bringing it up again), adds DECOY, then ADDR again, each
# waited for as a RoCE v2 GID of DEV: ADDR's GID comes back at another index.
readd_behind() {
    [ "${7:-}" != flap ] || nsx "$1" $IP link set "$2" down
    nsx "$1" $IP addr flush dev "$2" scope global
    [ "${7:-}" != flap ] || nsx "$1" $IP link set "$2" up
    nsx "$1" $IP addr add "$5/$6" dev "$2"
    wait_for 10 sh -c "[ -n \"\$(. /lab/lib.sh; roce_v2_gid_index $1 $3 $5)\" ]" || true
    nsx "$1" $IP addr add "$4/$6" dev "$2"
    wait_for 10 sh -c "[ -n \"\$(. /lab/lib.sh; roce_v2_gid_index $1 $3 $4)\" ]" || true
}

# agent_round LOG: one `rdmanet node-agent --once` round over $CNI_STATE, its output in LOG;
# its exit status.
agent_round() {
    "$CNI_BIN/rdmanet" node-agent --once --state-dir "$CNI_STATE" --cni-path "$CNI_BIN" --listen "" > "$1" 2>&1
}

# no_rdma_devices: this netns sees no RDMA device (and `rdma` itself worked).
no_rdma_devices() { _d=$(rdma dev show) && [ -z "$_d" ]; }
# no_rdma_links: no RDMA link (soft-RoCE or other) is left (and `rdma` itself worked).
no_rdma_links() { _d=$(rdma link show) && [ -z "$_d" ]; }
# rdma_devices_absent DEV...: `rdma dev show` works in this netns and lists none of DEV
# (each a name: an empty one fails, as it proves nothing).
rdma_devices_absent() {
    _d=$(rdma dev show) || { echo "rdma dev show failed"; return 1; }
    for _dev; do
        [ -n "$_dev" ] || { echo "no device name to look for"; return 1; }
        echo "$_d" | awk -v d="$_dev" '{ sub(/:$/, "", $2) } $2 == d { f = 1 } END { exit !f }' &&
            { echo "$_dev is still there: $_d"; return 1; }
    done
    echo "none of $* left"
}

# show TEXT...: a line for the human reading the demo.
show() { echo "DEMO| $*"; }

# --- the PCI tier (lab-machine: pci): igb PFs with SR-IOV, an e1000e, a disk -----

# PCI functions of the machine run.sh builds: two igb PFs on one wire (a QEMU hub), an
# e1000e (no SR-IOV: attached as a whole PF) on the same wire.
PF0_PCI=0000:01:00.0
PF1_PCI=0000:02:00.0
WHOLE_PCI=0000:03:00.0

# pci_netdev PCI: the netdev of a PCI function, as the host sees it (empty when none).
pci_netdev() { ls "/sys/bus/pci/devices/$1/net" 2>/dev/null | head -n1; }
# vf_pci PF_PCI N: the PCI address of VF N of a PF.
vf_pci() { basename "$(readlink "/sys/bus/pci/devices/$1/virtfn$2")"; }

# pci_setup NUMVFS: loads the NIC drivers, brings the PFs up (VFs only work under an up
# PF) and gives each igb PF NUMVFS VFs; waits until every VF has a netdev and has
# registered its MAC with its PF (igb shows 00:00:.. until then).
pci_setup() {
    modprobe igb && modprobe igbvf && modprobe e1000e || return 1
    wait_for 20 sh -c ". /lab/lib.sh; [ -n \"\$(pci_netdev $PF0_PCI)\" ] && [ -n \"\$(pci_netdev $PF1_PCI)\" ] && [ -n \"\$(pci_netdev $WHOLE_PCI)\" ]" || return 1
    for pf in $PF0_PCI $PF1_PCI $WHOLE_PCI; do $IP link set "$(pci_netdev $pf)" up || return 1; done
    for pf in $PF0_PCI $PF1_PCI; do echo "$1" > "/sys/bus/pci/devices/$pf/sriov_numvfs" || return 1; done
    wait_for 30 vfs_ready "$1" && return 0
    # Seen once in CI: igb reset its adapter ("Reset adapter") while its VFs were probing,
    # and the PF never learned their MACs. Opening a VF's netdev resets the VF, which
    # registers its MAC again: once, then the same wait, then say what is missing.
    echo "pci_setup: VFs not ready after 30 s ($(vfs_ready "$1" why)); reopening them"
    for pf in $PF0_PCI $PF1_PCI; do n=0; while [ $n -lt "$1" ]; do
        _vf=$(pci_netdev "$(vf_pci $pf $n)")
        [ -n "$_vf" ] && $IP link set "$_vf" up && $IP link set "$_vf" down
        n=$((n + 1)); done; done
    wait_for 20 vfs_ready "$1" || { echo "pci_setup: $(vfs_ready "$1" why)"; return 1; }
}
# vfs_ready NUMVFS [why]: every VF of both PFs has a netdev and its PF knows its MAC; with
# "why", prints the first that is not.
vfs_ready() {
    for _pf in $PF0_PCI $PF1_PCI; do _n=0; while [ $_n -lt "$1" ]; do
        _vfpci=$(vf_pci $_pf $_n)
        if [ -z "$(pci_netdev "$_vfpci")" ]; then
            [ "${2:-}" = why ] && echo "VF $_n of $_pf ($_vfpci) has no netdev"; return 1
        fi
        if vf_line $_pf $_n | grep -q 'link/ether 00:00:00:00:00:00'; then
            [ "${2:-}" = why ] && echo "VF $_n of $_pf: the PF has no MAC for it"; return 1
        fi
        _n=$((_n + 1)); done; done
}

# vf_line PF_PCI N: VF N as its PF reports it (`ip link show <pf>`), one line.
vf_line() {
    $IP link show "$(pci_netdev "$1")" | awk -v n="$2" '$1 == "vf" && $2 == n { $1 = ""; $2 = ""; sub(/^ +/, ""); print }'
}
# host_state PCI: "name mac mtu up|down" of a PCI function's netdev in the host; empty when
# it is not in the host.
host_state() {
    _n=$(pci_netdev "$1")
    [ -n "$_n" ] || return 0
    $IP -o link show dev "$_n" | awk '{ s = ($3 ~ /[<,]UP[,>]/) ? "up" : "down"
        for (i = 1; i <= NF; i++) { if ($i == "mtu") m = $(i + 1); if ($i == "link/ether") a = $(i + 1) }
        n = $2; sub(/:$/, "", n); print n, a, m, s }'
}

# sriov_conf SELECTOR_JSON [EXTRA_JSON_MEMBERS]: a network config for one VF or PF with
# rdmanet-ipam, state and IPAM store in $CNI_STATE and $CNI_IPAM.
sriov_conf() {
    cat <<JSON
{"cniVersion": "1.0.0", "name": "sriov", "type": "rdmanet", $1,
 "stateDir": "$CNI_STATE", "logFile": "$CNI_LOG", "logLevel": "debug"${2:+, $2},
 "ipam": {"type": "rdmanet-ipam", "dataDir": "$CNI_IPAM",
          "ranges": [[{"subnet": "10.57.0.0/24", "rangeStart": "10.57.0.10"}]]}}
JSON
}

# no_attachments: no state file, hold or lease is left.
no_attachments() {
    _s=$(find "$CNI_STATE" -name '*.json' 2>/dev/null | wc -l)
    _h=$(find "$CNI_STATE/holds" -type f 2>/dev/null | wc -l)
    _l=$(find "$CNI_IPAM" -path '*leases/*' -type f 2>/dev/null | wc -l)
    echo "state files: $_s, holds: $_h, leases: $_l"
    [ "$_s" -eq 0 ] && [ "$_h" -eq 0 ] && [ "$_l" -eq 0 ]
}

# same WHAT BEFORE AFTER: passes when AFTER equals BEFORE, showing both otherwise.
same() {
    [ "$2" = "$3" ] && { echo "$1: $3"; return 0; }
    echo "$1 changed: before [$2] after [$3]"
    return 1
}

# --- two nodes (lab-nodes: 2; see run.sh) ------------------------------------------------
# Two guests, node a and node b, each with three e1000e NICs; NIC k of one node and NIC k of
# the other are the two ends of wire wK (nothing else on it). node_setup names them w0, w1,
# w2 in the init netns; w0 carries the control channel (192.168.77.1 on a, .2 on b: barriers
# and small files between the scenario's two halves), w1 and w2 are the data wires.

# This node (a or b) and the other one; empty on a single-node boot.
# (Shell built-ins only: every scenario's `sh -c ". /lab/lib.sh; ..."` runs this.)
LAB_NODE=""
read -r _cmdline < /proc/cmdline
case " $_cmdline " in *" lab.node=a "*) LAB_NODE=a ;; *" lab.node=b "*) LAB_NODE=b ;; esac
case "$LAB_NODE" in a) LAB_PEER=b ;; b) LAB_PEER=a ;; *) LAB_PEER="" ;; esac
# Control addresses on w0 (init netns).
node_ctl_addr() { [ "$1" = a ] && echo 192.168.77.1 || echo 192.168.77.2; }
LAB_INBOX=/tmp/lab-inbox
LAB_MAILBOX_PORT=7777

# node_setup: loads e1000e, names this node's NICs w0..w2 (by MAC, 52:54:00:4e:0<node>:0<k>),
# puts the control address on w0, starts the mailbox (busybox nc) and the reader of the
# host's answers (ttyS1), and waits until the other node answers (barrier "setup").
node_setup() {
    [ -n "$LAB_NODE" ] || { echo "node_setup: no lab.node= on the kernel command line"; return 1; }
    modprobe e1000e || return 1
    for _k in 0 1 2; do
        _mac=52:54:00:4e:0$LAB_NODE:0$_k
        wait_for 20 sh -c "grep -lqx $_mac /sys/class/net/*/address" || { echo "no NIC with MAC $_mac"; return 1; }
        _if=$(basename "$(dirname "$(grep -lx "$_mac" /sys/class/net/*/address | head -n1)")")
        [ "$_if" = "w$_k" ] || $IP link set "$_if" name "w$_k" || return 1
    done
    # lo up: programs on the node talk to themselves (etcd to its own peer URL).
    $IP link set lo up || return 1
    $IP addr add "$(node_ctl_addr "$LAB_NODE")/24" dev w0 && $IP link set w0 up || return 1
    # The mailbox: each connection carries "NAME SIZE\n" and SIZE bytes, stored as
    # $LAB_INBOX/NAME once complete (renamed into place), then answered "ok NAME".
    mkdir -p "$LAB_INBOX"
    cat > /tmp/lab-mailbox <<'MB'
#!/bin/sh
read -r name size || exit 0
case "$name" in ""|*/*|.*) exit 1 ;; esac
head -c "$size" > "/tmp/lab-inbox/.$name.$$" && [ "$(wc -c < "/tmp/lab-inbox/.$name.$$")" -eq "$size" ] &&
    mv "/tmp/lab-inbox/.$name.$$" "/tmp/lab-inbox/$name" && echo "ok $name"
MB
    chmod 755 /tmp/lab-mailbox
    nc -ll -p "$LAB_MAILBOX_PORT" -e /tmp/lab-mailbox > /dev/null 2>&1 &
    # The host's answers to host_cmd arrive on ttyS1 (raw, no echo, no modem lines).
    stty -F /dev/ttyS1 raw -echo clocal 2>/dev/null || true
    : > /tmp/lab-host-acks
    cat /dev/ttyS1 >> /tmp/lab-host-acks 2>/dev/null &
    wait_for 20 sh -c "[ \"\$(cat /sys/class/net/w0/carrier)\" = 1 ]" || { echo "w0 has no carrier"; return 1; }
    barrier setup 90
}

# _uptime: whole seconds since boot (shell built-ins only).
_uptime() { read -r _up _ < /proc/uptime; echo "${_up%.*}"; }

# peer_send NAME [FILE] [TIMEOUT]: FILE (default: nothing) into the other node's inbox as
# NAME; retries until its mailbox confirms or TIMEOUT (30) s pass; fails at once when the
# other node gave up ("abort" in this node's inbox).
peer_send() {
    _f=${2:-/dev/null}
    _end=$(( $(_uptime) + ${3:-30} ))
    _sz=$(wc -c < "$_f") || return 1
    while [ "$(_uptime)" -lt "$_end" ]; do
        _ans=$({ echo "$1 $_sz"; cat "$_f"; } | timeout 5 nc -w 2 "$(node_ctl_addr "$LAB_PEER")" "$LAB_MAILBOX_PORT" 2>/dev/null) || true
        [ "$_ans" = "ok $1" ] && return 0
        [ "$1" = abort ] || [ ! -f "$LAB_INBOX/abort" ] || { echo "peer_send $1: node $LAB_PEER gave up"; return 1; }
        sleep 0.2
    done
    echo "peer_send $1: node $LAB_PEER did not take it in ${3:-30} s"
    return 1
}
# peer_wait NAME [TIMEOUT]: until the other node has sent NAME (default 120 s); fails at once
# when the other node gave up (its scenario failed: "abort").
peer_wait() {
    _end=$(( $(_uptime) + ${2:-120} ))
    while [ "$(_uptime)" -lt "$_end" ]; do
        [ -f "$LAB_INBOX/$1" ] && return 0
        [ -f "$LAB_INBOX/abort" ] && { echo "peer_wait $1: node $LAB_PEER gave up"; return 1; }
        sleep 0.2
    done
    echo "peer_wait $1: nothing from node $LAB_PEER in ${2:-120} s"
    return 1
}
# peer_recv NAME [TIMEOUT]: waits for NAME, prints its content.
peer_recv() { peer_wait "$@" >&2 && cat "$LAB_INBOX/$1"; }
# barrier NAME [TIMEOUT]: both nodes got here (each name once per boot).
barrier() { peer_send "barrier.$1" /dev/null "${2:-120}" && peer_wait "barrier.$1" "${2:-120}"; }
# peer_abort: tells the other node this one gave up (/init does it when the scenario fails).
peer_abort() { [ -z "$LAB_PEER" ] || peer_send abort /dev/null 5 > /dev/null 2>&1 || true; }

# host_cmd NODE CMD...: asks the host to run CMD on QEMU's monitor of NODE (a, b or both);
# waits for its answer (30 s). Only "set_link wK on|off" is carried out (hostctl.py). Prints
# the host's answer; fails when the host refused or did not answer.
host_cmd() {
    _node=$1; shift
    _seq=$(( $(cat /tmp/lab-host-seq 2>/dev/null || echo 0) + 1 ))
    echo "$_seq" > /tmp/lab-host-seq
    _id="$LAB_NODE$_seq"
    echo "LAB-HOST id=$_id node=$_node $*" > /dev/console
    _t=150
    while [ "$_t" -gt 0 ]; do
        _ack=$(grep "^LAB-ACK id=$_id " /tmp/lab-host-acks | tail -n1)
        if [ -n "$_ack" ]; then
            echo "$_ack"
            case "$_ack" in *" rc=0 "*) return 0 ;; *) return 1 ;; esac
        fi
        sleep 0.2; _t=$((_t - 1))
    done
    echo "host_cmd: no answer from the host to id=$_id ($*) in 30 s"
    return 1
}
# host_set_link NODE WIRE on|off: the link of WIRE (w0, w1, w2) goes down or up as QEMU's
# `set_link` does it, on NODE's NIC (a, b) or on both ends (both): the NIC loses or regains
# its carrier as if the cable were pulled or plugged. Returns once QEMU did it (the guest's
# driver sees it a moment later: wait for the carrier you need).
host_set_link() { host_cmd "$1" set_link "$2" "$3"; }

# wire_carrier NS IFNAME: the carrier (0/1) of IFNAME in netns NS ("-": the init netns).
wire_carrier() {
    if [ "$1" = - ]; then cat "/sys/class/net/$2/carrier" 2>/dev/null || echo 0
    else nsx "$1" cat "/sys/class/net/$2/carrier" 2>/dev/null || echo 0; fi
}
# port_state NS DEV: the state of DEV's port 1 as `rdma link show` gives it in NS (ACTIVE,
# DOWN, ...; "-": the init netns).
port_state() {
    if [ "$1" = - ]; then rdma link show "$2/1" 2>/dev/null
    else nsx "$1" rdma link show "$2/1" 2>/dev/null; fi | sed -n 's/.* state \([A-Z_]*\) .*/\1/p'
}
