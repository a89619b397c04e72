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
# (e.g. ib_core.netns_mode=0). Exit status: 0 only when the guest reported,
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

t_start=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# Missing qemu or kernel is a failure, never a skip: fetch.sh installs and
# downloads, and exits non-zero when it cannot.
"$HERE/fetch.sh" "$KERNEL"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing after fetch.sh"
t_fetch=$(since "$t_start")

tmp=$(mktemp -d)
# kill_qemu: by the pid QEMU wrote, and only if that pid is still QEMU.
kill_qemu() {
    pid=$(cat "$tmp/qemu.pid" 2>/dev/null || true)
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = qemu-system-x86 ] &&
        kill -9 "$pid" 2>/dev/null || true
}
cleanup() {
    # Never leave a guest behind, whatever ended this script.
    kill_qemu
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$(date +%s.%N)
"$HERE/initramfs.sh" "$KERNEL" "$tmp/initrd.cpio" "${ADDS[@]+"${ADDS[@]}"}"
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
    timeout -k 5 "$TIMEOUT" qemu-system-x86_64 \
        $accel -machine pc -m 1024 -smp 2 \
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

t0=$(date +%s.%N)
boot
# Seen once in ~20 runs under TCG: the kernel hangs before /init with no
# console output. That says nothing about RDMA, so boot once more, loudly;
# anything after /init started is never retried.
retried=""
if ! grep -q 'LAB-TIME stage=init' "$tmp/console.log"; then
    echo "run.sh: RETRY: the guest never reached /init (boot hang, rc=$qemu_rc); booting again"
    retried=" (after a boot retry)"
    t0=$(date +%s.%N)
    boot
fi
t_boot=$(since "$t0")

# --- verdict ---------------------------------------------------------------------
log=$tmp/console.log
fail=0
echo
echo "==== lab summary: $SCENARIO (kernel $KERNEL) ===="
grep -o 'LAB-RESULT .*' "$log" | sed 's/^LAB-RESULT /  /' || true
grep -o 'LAB-FACT .*' "$log" | sed 's/^LAB-FACT /  fact: /' || true
npass=$(grep -c 'LAB-RESULT .* status=pass' "$log" || true)
nfail=$(grep -c 'LAB-RESULT .* status=fail' "$log" || true)
done_line=$(grep -o 'LAB-DONE .*' "$log" | tail -n1 || true)
if ! grep -q 'LAB-TIME stage=init' "$log"; then
    echo "  FAIL: the guest never reached /init (twice)"; fail=1
elif [ "$qemu_rc" -eq 124 ] || [ "$qemu_rc" -eq 137 ]; then
    echo "  FAIL: guest did not finish within ${TIMEOUT}s (qemu killed)"; fail=1
elif [ "$qemu_rc" -ne 0 ]; then
    echo "  FAIL: qemu exited with $qemu_rc"; fail=1
fi
if [ -z "$done_line" ]; then
    echo "  FAIL: the guest never reported LAB-DONE (crash, panic or hang)"; fail=1
elif ! echo "$done_line" | grep -q ' rc=0$'; then
    echo "  FAIL: $done_line"; fail=1
fi
[ "$npass" -gt 0 ] || { echo "  FAIL: no passing checks reported"; fail=1; }
[ "$nfail" -eq 0 ] || fail=1
# Guest uptimes: kernel start -> /init -> modules loaded -> scenario done.
times=$(grep -o 'LAB-TIME .*' "$log" | sed 's/LAB-TIME stage=\([a-z]*\) uptime=/\1=/' | tr '\n' ' ' || true)
echo "  timing: fetch-check ${t_fetch}s, initramfs ${t_initramfs}s, qemu start-to-exit ${t_boot}s; guest uptime at: ${times}"
echo "  $npass passed, $nfail failed: $([ "$fail" -eq 0 ] && echo PASS || echo FAIL)$retried"
exit "$fail"
