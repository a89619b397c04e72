#!/bin/bash
# Boots one lab scenario in QEMU and reports its results.
#
# Usage: run.sh [--add SRC:DST]... [--timeout SECONDS] SCENARIO [KERNEL]
#   SCENARIO  name of tests/lab/scenarios/SCENARIO.sh
#   KERNEL    kernel alias (7.3, 6.1); default: the scenario's "# lab-kernel:" line
#   --add     extra file for the guest (see initramfs.sh), e.g. the CNI binary
# Env: RDMANET_LAB_CACHE   cache root (default /var/cache/rdmanet-lab)
#      RDMANET_LAB_ACCEL   tcg (default) or kvm
#      RDMANET_LAB_BOOT_DEADLINE  seconds for the guest to reach /init (60)
#
# The scenario's "# lab-cmdline:" line is appended to the kernel command line
# (e.g. ib_core.netns_mode=0). "# lab-machine: pci" boots the PCI tier's machine
# (QEMU 10 from fetch.sh, q35, two igb NICs with SR-IOV and an e1000e on one hub
# with no host backend, a virtio disk); "# lab-boots: N" boots it N times with the
# same disk, lab.boot=1..N on the kernel command line (a real reboot in between);
# "# lab-workloads: ucx-mpi" adds UCX and Open MPI to the image (initramfs.sh --workloads),
# "two-node" dropbear and etcd (initramfs.sh --two-node); several words, several archives.
#
# "# lab-nodes: 2" boots two guests of the kernel side by side (node a and node b, the
# same image, lab.node=a|b on each kernel command line), each a classic pc with three
# e1000e NICs (they negotiate their link, as server NICs do), on the PCI tier's QEMU 10
# (QEMU 7.2's e1000e never tells the guest's driver, in its default MSI-X mode, that the
# host took the link down). NIC k of node a and NIC k of
# node b are joined by a point-to-point wire of their own: QEMU's -netdev dgram, id wK,
# between two UDP sockets on 127.0.0.1 (free ports picked per run), nothing else on it.
# Wire w0 is the scenario's control channel (lib.sh node_setup: static addresses, barriers
# and small files over busybox nc), w1 and w2 are the data wires (rails). MAC of NIC k:
# 52:54:00:4e:0a:0k on node a, 52:54:00:4e:0b:0k on node b. A guest asks the host to take a
# wire's link down or up with a console line "LAB-HOST id=ID node=a|b|both set_link wK
# off|on" (lib.sh host_set_link): hostctl.py runs it on that QEMU's human monitor (a unix
# socket) and answers "LAB-ACK id=ID rc=N" on the asking guest's ttyS1. Each console is
# printed with "a| " / "b| "; LAB-RESULT names and LAB-FACT keys get the node ("a:name").
# Every node must reach /init, exit QEMU cleanly and report LAB-DONE rc=0. A node that
# never reaches /init has both booted again (once): the two halves of a scenario
# synchronise, so one cannot go on alone. A node that ends without LAB-DONE rc=0 has its
# peer stopped 20 s later (the peer is waiting for it). Both QEMUs and hostctl are killed
# on every exit path.
#
# Exit status: 0 only when the guest reported,
# every LAB-RESULT passed and the scenario script succeeded. A guest that never
# reports (hang, panic, timeout) is a failure; QEMU is never left running.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${RDMANET_LAB_CACHE:-/var/cache/rdmanet-lab}
ACCEL=${RDMANET_LAB_ACCEL:-tcg}
die() { echo "run.sh: FATAL: $*" >&2; exit 1; }

ADDS=() TIMEOUT=180
while [ $# -gt 0 ]; do
    case "$1" in
        --add) [ $# -ge 2 ] || die "--add needs SRC:DST"; ADDS+=(--add "$2"); shift 2 ;;
        --timeout) [ $# -ge 2 ] || die "--timeout needs seconds"; TIMEOUT=$2; shift 2 ;;
        -*) die "unknown option $1" ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: run.sh [--add SRC:DST]... [--timeout S] SCENARIO [KERNEL]"
SCENARIO=$1
SCRIPT=$HERE/scenarios/$SCENARIO.sh
[ -f "$SCRIPT" ] || die "no scenario $SCRIPT"
header() { sed -n "s/^# lab-$1: *//p" "$SCRIPT" | head -n1; }
KERNEL=${2:-$(header kernel)}
[ -n "$KERNEL" ] || die "$SCRIPT has no '# lab-kernel:' line and no KERNEL was given"
EXTRA_CMDLINE=$(header cmdline)
MACHINE=$(header machine)
WORKLOADS=$(header workloads)
BOOTS=$(header boots)
BOOTS=${BOOTS:-1}
NODES=$(header nodes)
NODES=${NODES:-1}
case "$NODES" in
    1) ;;
    2) case "$MACHINE" in "" | pc) ;; *) die "$SCRIPT: lab-nodes: 2 runs on the pc machine only" ;; esac
       [ "$BOOTS" -eq 1 ] || die "$SCRIPT: lab-nodes: 2 boots once" ;;
    *) die "$SCRIPT: lab-nodes must be 1 or 2, not '$NODES'" ;;
esac

t_start=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# Missing qemu or kernel is a failure, never a skip: fetch.sh installs and
# downloads, and exits non-zero when it cannot.
case "$MACHINE" in
    "" | pc)
        if [ "$NODES" -eq 2 ]; then
            # QEMU 7.2's e1000e never tells the guest's driver (MSI-X, its default) that
            # set_link changed the link; QEMU 10's does.
            "$HERE/fetch.sh" "$KERNEL" qemu
            QEMU=$CACHE/qemu/qemu-system-x86_64
        else
        "$HERE/fetch.sh" "$KERNEL"
        QEMU=$(command -v qemu-system-x86_64) || die "qemu-system-x86_64 missing after fetch.sh"
        fi ;;
    pci)
        "$HERE/fetch.sh" "$KERNEL" qemu
        QEMU=$CACHE/qemu/qemu-system-x86_64 ;;
    *) die "$SCRIPT: unknown lab-machine '$MACHINE' (pc or pci)" ;;
esac
t_fetch=$(since "$t_start")

tmp=$(mktemp -d)
# kill_qemu [PIDFILE]: by the pid QEMU wrote (default $tmp/qemu.pid; the two-node
# tier's are qemu-a.pid and qemu-b.pid), and only if that pid is still QEMU (the
# PCI tier's runs under the unpacked tree's loader: its name is in the arguments).
kill_qemu() {
    pid=$(cat "${1:-$tmp/qemu.pid}" 2>/dev/null || true)
    [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | grep -q qemu-system-x86_64 &&
        kill -9 "$pid" 2>/dev/null || true
}
# kill_hostctl: the two-node tier's host helper, by its pid, if it is still hostctl.
kill_hostctl() {
    pid=$(cat "$tmp/hostctl.pid" 2>/dev/null || true)
    [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | grep -q hostctl.py &&
        kill "$pid" 2>/dev/null || true
}
# shellcheck disable=SC2317 # called by the trap
cleanup() {
    # Never leave a guest behind, whatever ended this script.
    kill_qemu
    kill_qemu "$tmp/qemu-a.pid"
    kill_qemu "$tmp/qemu-b.pid"
    kill_hostctl
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$(date +%s.%N)
wl_opt=()
for w in $WORKLOADS; do
    case "$w" in
        ucx-mpi) wl_opt+=(--workloads) ;;
        two-node) wl_opt+=(--two-node) ;;
        *) die "$SCRIPT: unknown lab-workloads '$w' (ucx-mpi, two-node)" ;;
    esac
done
"$HERE/initramfs.sh" "$KERNEL" "$tmp/initrd.cpio" "${wl_opt[@]+"${wl_opt[@]}"}" "${ADDS[@]+"${ADDS[@]}"}"
t_initramfs=$(since "$t0")

case "$ACCEL" in
    tcg) accel="-accel tcg,thread=multi" ;;
    kvm) [ -w /dev/kvm ] || die "RDMANET_LAB_ACCEL=kvm but /dev/kvm is not usable"
         accel="-accel kvm -cpu host" ;;
    *) die "RDMANET_LAB_ACCEL must be tcg or kvm" ;;
esac

# quiet (loglevel 4) still shows warnings, oopses and hung tasks, which is
# what explains a guest that never reports; the report lines are found
# anywhere in a console line, so an interleaved kernel message is harmless. panic=-1 + -no-reboot: a panic
# ends QEMU at once instead of waiting for the timeout. The guest's own
# scenario timeout is kept below ours so it can still report.
cmdline="console=ttyS0 panic=-1 quiet mitigations=off lab.scenario=$SCENARIO $EXTRA_CMDLINE"
guest_timeout=$(( TIMEOUT - 30 ))
[ "$guest_timeout" -ge 20 ] || guest_timeout=20
cmdline="$cmdline LAB_SCENARIO_TIMEOUT=$guest_timeout"

echo "run.sh: $SCENARIO on kernel $KERNEL ($(cat "$CACHE/kernels/$KERNEL/kver")), accel $ACCEL"
echo "run.sh: cmdline: $cmdline"
# The machine: the classic pc, or the PCI tier's q35 whose NICs are PCIe
# functions behind root ports (as on servers; VFs get their own bus numbers) and
# talk to each other only (a hub without a host backend). The disk keeps the
# plugin's state across reboots.
machine=(-machine pc -m 1024)
if [ "$MACHINE" = pci ]; then
    truncate -s 64M "$tmp/disk.img"
    machine=(-machine q35 -m 1536
        -device pcie-root-port,id=rp1,chassis=1 -device pcie-root-port,id=rp2,chassis=2
        -device pcie-root-port,id=rp3,chassis=3
        -netdev hubport,id=h1,hubid=0 -device igb,bus=rp1,netdev=h1,mac=52:54:00:1a:b0:01
        -netdev hubport,id=h2,hubid=0 -device igb,bus=rp2,netdev=h2,mac=52:54:00:1a:b0:02
        -netdev hubport,id=h3,hubid=0 -device e1000e,bus=rp3,netdev=h3,mac=52:54:00:1a:b0:03
        -drive file="$tmp/disk.img",if=none,id=disk,format=raw -device virtio-blk-pci,drive=disk)
fi

# boot: one QEMU run, console in $tmp/console.log. A watchdog kills a guest
# that has not reached /init after BOOT_DEADLINE s (it normally takes 5-8 s).
BOOT_DEADLINE=${RDMANET_LAB_BOOT_DEADLINE:-60}
boot() {
    rm -f "$tmp/qemu.pid" "$tmp/console.log"; : > "$tmp/console.log"
    # Short sleeps: the watchdog ends as soon as /init reports, and leaves no
    # long sleep holding the test's output pipe open.
    (
        i=0
        while [ "$i" -lt "$BOOT_DEADLINE" ]; do
            sleep 1; i=$((i + 1))
            grep -q 'LAB-TIME stage=init' "$tmp/console.log" && exit 0
        done
        echo "run.sh: guest did not reach /init in ${BOOT_DEADLINE}s: killing it" >&2
        kill_qemu
    ) &
    watchdog=$!
    set +e
    # Unbuffered filters only: the watchdog reads console.log while the guest runs.
    # shellcheck disable=SC2086 # $accel is a word list
    timeout -k 5 "$TIMEOUT" "$QEMU" \
        $accel "${machine[@]}" -smp 2 \
        -nodefaults -no-user-config -display none -serial stdio -monitor none -no-reboot \
        -pidfile "$tmp/qemu.pid" \
        -kernel "$CACHE/kernels/$KERNEL/vmlinuz" -initrd "$tmp/initrd.cpio" \
        -append "$cmdline" \
        </dev/null 2>&1 | sed -u 's/\r//g' | tee "$tmp/console.log" | sed -u 's/^/guest| /'
    qemu_rc=${PIPESTATUS[0]}
    set -e
    kill "$watchdog" 2>/dev/null || true
    wait "$watchdog" 2>/dev/null || true
}

# --- two nodes (lab-nodes: 2) -------------------------------------------------------------
# free_udp_ports N: N UDP ports on 127.0.0.1 that nothing holds now (the kernel picks them;
# all are held together while picking, so they differ).
free_udp_ports() {
    python3 -c 'import socket, sys
socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}
WIRES="0 1 2"
# node_qemu NODE: one node's QEMU, console in $tmp/console-NODE.log (printed with "NODE| "),
# its exit code in $tmp/rc-NODE. Runs in the background.
node_qemu() {
    _n=$1
    _peer=$([ "$_n" = a ] && echo b || echo a)
    _net=()
    for k in $WIRES; do
        _net+=(-netdev "dgram,id=w$k,local.type=inet,local.host=127.0.0.1,local.port=${PORT[$_n$k]},remote.type=inet,remote.host=127.0.0.1,remote.port=${PORT[$_peer$k]}"
               -device "e1000e,netdev=w$k,mac=52:54:00:4e:0$_n:0$k")
    done
    set +e
    # shellcheck disable=SC2086 # $accel is a word list
    timeout -k 5 "$TIMEOUT" "$QEMU" \
        $accel -machine pc -m 1280 -smp 2 "${_net[@]}" \
        -nodefaults -no-user-config -display none -serial stdio -no-reboot \
        -chardev "socket,id=hostctl,path=$tmp/ctl-$_n.sock,server=on,wait=off" -device isa-serial,chardev=hostctl \
        -monitor "unix:$tmp/mon-$_n.sock,server=on,wait=off" \
        -pidfile "$tmp/qemu-$_n.pid" \
        -kernel "$CACHE/kernels/$KERNEL/vmlinuz" -initrd "$tmp/initrd.cpio" \
        -append "$cmdline lab.node=$_n" \
        </dev/null 2>&1 | sed -u 's/\r//g' | tee "$tmp/console-$_n.log" | sed -u "s/^/$_n| /"
    echo "${PIPESTATUS[0]}" > "$tmp/rc-$_n"
}
reached_init() { grep -q 'LAB-TIME stage=init' "$tmp/console-$1.log" 2>/dev/null; }
done_ok() { grep -q 'LAB-DONE .* rc=0$' "$tmp/console-$1.log" 2>/dev/null; }
# boot_pair: both nodes' QEMUs side by side, and hostctl for their requests; returns when
# both QEMUs have exited. Kills both when one has not reached /init after BOOT_DEADLINE s,
# and a node's peer 20 s after the node ended without LAB-DONE rc=0.
boot_pair() {
    rm -f "$tmp"/rc-? "$tmp"/qemu-?.pid "$tmp"/*.sock
    : > "$tmp/console-a.log"; : > "$tmp/console-b.log"
    read -r -a _p <<< "$(free_udp_ports 6)"
    declare -gA PORT=()
    for k in $WIRES; do PORT[a$k]=${_p[$((2 * k))]}; PORT[b$k]=${_p[$((2 * k + 1))]}; done
    echo "run.sh: wires (UDP on 127.0.0.1, node a <-> node b): $(for k in $WIRES; do printf 'w%s %s<->%s ' "$k" "${PORT[a$k]}" "${PORT[b$k]}"; done)"
    node_qemu a & _qa=$!
    node_qemu b & _qb=$!
    python3 -u "$HERE/hostctl.py" "a=$tmp/console-a.log,$tmp/mon-a.sock,$tmp/ctl-a.sock" \
        "b=$tmp/console-b.log,$tmp/mon-b.sock,$tmp/ctl-b.sock" > >(sed -u 's/^/host| /') 2>&1 &
    echo $! > "$tmp/hostctl.pid"
    _t=0 _bad="" _stopped=""
    while [ ! -f "$tmp/rc-a" ] || [ ! -f "$tmp/rc-b" ]; do
        if [ "$_t" -eq "$BOOT_DEADLINE" ] && { ! reached_init a || ! reached_init b; }; then
            echo "run.sh: a node did not reach /init in ${BOOT_DEADLINE}s (a: $(reached_init a && echo yes || echo no), b: $(reached_init b && echo yes || echo no)): killing both" >&2
            kill_qemu "$tmp/qemu-a.pid"; kill_qemu "$tmp/qemu-b.pid"
        fi
        for _n in a b; do
            _o=$([ "$_n" = a ] && echo b || echo a)
            if [ -z "$_bad" ] && [ -f "$tmp/rc-$_n" ] && [ ! -f "$tmp/rc-$_o" ] && ! done_ok "$_n"; then
                _bad=$_t
                echo "run.sh: node $_n ended without LAB-DONE rc=0; node $_o gets 20 s to finish" >&2
            fi
            if [ -n "$_bad" ] && [ -z "$_stopped" ] && [ $((_t - _bad)) -ge 20 ] && [ ! -f "$tmp/rc-$_o" ]; then
                echo "run.sh: stopping node $_o (its peer is gone)" >&2
                kill_qemu "$tmp/qemu-$_o.pid"; _stopped=1
            fi
        done
        sleep 1; _t=$((_t + 1))
    done
    wait "$_qa" "$_qb" 2>/dev/null || true
    kill_hostctl; rm -f "$tmp/hostctl.pid"
    wait 2>/dev/null || true
}
boot_two_nodes() {
    boot_pair
    if ! reached_init a || ! reached_init b; then
        echo "run.sh: RETRY: a node never reached /init (boot hang; a rc=$(cat "$tmp/rc-a"), b rc=$(cat "$tmp/rc-b")); booting both again"
        retried=" (both nodes retried)"
        boot_pair
    fi
    for _n in a b; do
        # Node-qualified names: a:check, a:fact.
        sed -e "s/LAB-RESULT name=/LAB-RESULT name=$_n:/" -e "s/LAB-FACT /LAB-FACT $_n:/" \
            "$tmp/console-$_n.log" >> "$tmp/all.log"
        _rc=$(cat "$tmp/rc-$_n")
        _done=$(grep -o 'LAB-DONE .*' "$tmp/console-$_n.log" | tail -n1)
        if ! reached_init "$_n"; then
            boot_problems="$boot_problems
  FAIL: node $_n never reached /init (twice)"
        elif [ "$_rc" -eq 124 ] || [ "$_rc" -eq 137 ]; then
            boot_problems="$boot_problems
  FAIL: node $_n did not finish within ${TIMEOUT}s (qemu killed; $([ -n "$_done" ] && echo "$_done" || echo 'no LAB-DONE'))"
        elif [ "$_rc" -ne 0 ]; then
            boot_problems="$boot_problems
  FAIL: node $_n: qemu exited with $_rc"
        elif [ -z "$_done" ]; then
            boot_problems="$boot_problems
  FAIL: node $_n never reported LAB-DONE (crash, panic or hang)"
        elif ! echo "$_done" | grep -q ' rc=0$'; then
            boot_problems="$boot_problems
  FAIL: node $_n: $_done"
        fi
    done
}

# Each boot: seen once in ~20 runs under TCG, the kernel hangs or oopses before
# /init. That says nothing about RDMA, so such a boot is repeated once, loudly;
# anything after /init started is never retried. Every boot must reach /init,
# exit QEMU cleanly and report LAB-DONE rc=0.
: > "$tmp/all.log"
retried=""
boot_problems=""
t0=$(date +%s.%N)
base_cmdline=$cmdline
if [ "$NODES" -eq 2 ]; then
    boot_two_nodes
else
    for n in $(seq 1 "$BOOTS"); do
        cmdline="$base_cmdline lab.boot=$n"
        [ "$BOOTS" -eq 1 ] || echo "run.sh: boot $n of $BOOTS"
        boot
        if ! grep -q 'LAB-TIME stage=init' "$tmp/console.log"; then
            echo "run.sh: RETRY: boot $n never reached /init (boot hang, rc=$qemu_rc); booting again"
            retried="$retried (boot $n retried)"
            boot
        fi
        cat "$tmp/console.log" >> "$tmp/all.log"
        done_line=$(grep -o 'LAB-DONE .*' "$tmp/console.log" | tail -n1)
        if ! grep -q 'LAB-TIME stage=init' "$tmp/console.log"; then
            boot_problems="$boot_problems
      FAIL: boot $n never reached /init (twice)"
            break
        elif [ "$qemu_rc" -eq 124 ] || [ "$qemu_rc" -eq 137 ]; then
            boot_problems="$boot_problems
      FAIL: boot $n did not finish within ${TIMEOUT}s (qemu killed)"
            break
        elif [ "$qemu_rc" -ne 0 ]; then
            boot_problems="$boot_problems
      FAIL: boot $n: qemu exited with $qemu_rc"
            break
        elif [ -z "$done_line" ]; then
            boot_problems="$boot_problems
      FAIL: boot $n never reported LAB-DONE (crash, panic or hang)"
            break
        elif ! echo "$done_line" | grep -q ' rc=0$'; then
            boot_problems="$boot_problems
      FAIL: boot $n: $done_line"
            break
        fi
    done
fi
t_boot=$(since "$t0")

# --- verdict ---------------------------------------------------------------------
log=$tmp/all.log
fail=0
echo
echo "==== lab summary: $SCENARIO (kernel $KERNEL) ===="
grep -o 'LAB-RESULT .*' "$log" | sed 's/^LAB-RESULT /  /' || true
grep -o 'LAB-FACT .*' "$log" | sed 's/^LAB-FACT /  fact: /' || true
npass=$(grep -c 'LAB-RESULT .* status=pass' "$log" || true)
nfail=$(grep -c 'LAB-RESULT .* status=fail' "$log" || true)
if [ -n "$boot_problems" ]; then
    echo "${boot_problems#?}"; fail=1
fi
[ "$npass" -gt 0 ] || { echo "  FAIL: no passing checks reported"; fail=1; }
[ "$nfail" -eq 0 ] || fail=1
# Guest uptimes: kernel start -> /init -> modules loaded -> scenario done.
times=$(grep -o 'LAB-TIME .*' "$log" | sed 's/LAB-TIME stage=\([a-z]*\) uptime=/\1=/' | tr '\n' ' ' || true)
echo "  timing: fetch-check ${t_fetch}s, initramfs ${t_initramfs}s, qemu start-to-exit ${t_boot}s; guest uptime at: ${times}"
echo "  $npass passed, $nfail failed: $([ "$fail" -eq 0 ] && echo PASS || echo FAIL)$retried"
exit "$fail"
