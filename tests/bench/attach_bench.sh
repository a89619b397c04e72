#!/usr/bin/env bash
# Attachment benchmark (issue #7 items 1-3). Not a test: timing is noisy, read
# the ratios. In one run on one machine it measures
#   1. ADD and DEL latency (median, p99) and peak RSS of
#      (a) rdmanet + rdmanet-ipam moving a veth end into a pod netns (netdev mode),
#      (b) Debian's reference host-device + host-local doing the same,
#      (c) the kernel floor: the same netlink requests from long-lived `ip -batch`
#          processes, so no process start, no IPAM, no state on disk;
#   2. a burst of BURST (64) ADDs launched at once, then as many DELs, for (a) and (b);
#   3. where one rdmanet ADD spends its time, from `strace -f -ttt -T`.
#
#   tests/bench/attach_bench.sh [path/to/rdmanet] [path/to/rdmanet-ipam]
#   CYCLES=200 BURST=64 TRACE_RUNS=5 VERSION_RUNS=50 BENCH_DIR=/var/tmp DISK_LOAD=0 (defaults)
#   DISK_LOAD=1: the latency part (1) runs beside a disk writer (disk_load.sh)
#
# Every plugin call is a fork+exec from this shell with the CNI environment and
# the config on stdin, as a runtime does; timestamps are bash's EPOCHREALTIME
# (no extra process). State and IPAM stores live under BENCH_DIR (default
# /var/tmp, the disk /var/lib/cni would be on), because fsync cost is real cost.
# Addresses come from 198.18.0.0/15 (RFC 2544 benchmarking range) and exist
# only inside the benchmark's own netns. Every link and netns is named
# atb<pid-hex>..., created here and deleted on every exit path.
set -euo pipefail
export LC_ALL=C # EPOCHREALTIME must use '.' as its decimal separator

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=disk_load.sh
. "$here/disk_load.sh"
CYCLES="${CYCLES:-200}"
BURST="${BURST:-64}"
TRACE_RUNS="${TRACE_RUNS:-5}"
VERSION_RUNS="${VERSION_RUNS:-50}"
REF_DIR="${REF_DIR:-/usr/lib/cni}"
src_ours="${1:-$here/../../build/agent/rdmanet}"
src_ipam="${2:-$here/../../build/ipam/rdmanet-ipam}"

die() {
  echo "attach_bench: $*" >&2
  exit 1
}

[[ "$(id -u)" -eq 0 ]] || die "run as root (it creates netns and veth pairs)"
((CYCLES >= 1 && BURST >= 1 && BURST <= 250 && TRACE_RUNS >= 1)) || die "bad CYCLES/BURST/TRACE_RUNS"

# --- dependencies (idempotent) -------------------------------------------------
need=()
[[ -x /usr/bin/time ]] || need+=(time)
command -v strace >/dev/null || need+=(strace)
command -v ip >/dev/null || need+=(iproute2)
[[ -x "$REF_DIR/host-device" && -x "$REF_DIR/host-local" ]] || need+=(containernetworking-plugins)
if ((${#need[@]})); then
  echo "installing: ${need[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get -y -qq install "${need[@]}" >/dev/null ||
    { apt-get -qq update && DEBIAN_FRONTEND=noninteractive apt-get -y -qq install "${need[@]}" >/dev/null; }
fi
for b in "$src_ours" "$src_ipam"; do [[ -x "$b" ]] || die "not executable: $b"; done

# --- names, scratch space, cleanup ---------------------------------------------
tag="atb$(printf '%x' $$)" # <= 9 chars: link names below stay within IFNAMSIZ
work="$(mktemp -d "${BENCH_DIR:-/var/tmp}/attach_bench.XXXXXX")"
peers=()     # host-side veth peers we created: deleting one deletes its pair wherever the other end is
netns=()     # netns we created
ip_pids=()   # the long-lived `ip -batch` processes (c)
burst_pids=() # plugin calls of a burst still running if we are interrupted

cleanup() {
  stop_disk_load
  set +e
  # ip -batch exits on EOF of its stdin
  [[ -n "${host_w:-}" ]] && exec {host_w}>&-
  [[ -n "${pod_w:-}" ]] && exec {pod_w}>&-
  for p in "${ip_pids[@]}" "${burst_pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  for l in "${peers[@]}"; do [[ -e "/sys/class/net/$l" ]] && ip link del "$l" 2>/dev/null; done
  for n in "${netns[@]}"; do ip netns del "$n" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# Copies, so a rebuild of build/ during the run cannot change what is measured;
# CNI_PATH for (a) holds only these two.
mkdir -p "$work/bin"
cp "$src_ours" "$work/bin/rdmanet"
cp "$src_ipam" "$work/bin/rdmanet-ipam"
ours="$work/bin/rdmanet"

# make_pair NAME: veth NAME (the "device" to attach) with peer NAMEp in the host.
make_pair() {
  ip link add "$1" type veth peer name "${1}p"
  ip link set "${1}p" up # the far end up, as a cabled NIC's: ADD finds carrier at once
  peers+=("${1}p")
}
make_netns() {
  ip netns add "$1"
  netns+=("$1")
}

# conf_ours DEVICE SUBNET / conf_ref DEVICE SUBNET: the two NetworkAttachment configs.
conf_ours() {
  printf '{"cniVersion":"1.0.0","name":"bench","type":"rdmanet","device":"%s","stateDir":"%s",' "$1" "$work/state"
  printf '"ipam":{"type":"rdmanet-ipam","dataDir":"%s","ranges":[[{"subnet":"%s"}]]}}' "$work/ipam-ours" "$2"
}
conf_ref() {
  printf '{"cniVersion":"1.0.0","name":"bench","type":"host-device","device":"%s",' "$1"
  printf '"ipam":{"type":"host-local","dataDir":"%s","ranges":[[{"subnet":"%s"}]]}}' "$work/ipam-ref" "$2"
}

# cni PLUGIN CNI_PATH COMMAND CONTAINERID NETNS CONF OUT: one call, as a runtime makes it.
cni() {
  CNI_COMMAND="$3" CNI_CONTAINERID="$4" CNI_NETNS="/run/netns/$5" CNI_IFNAME=eth0 CNI_PATH="$2" \
    "$1" <<<"$6" >"$7" 2>>"$work/stderr.log"
}

# timed_cni ... (as cni): runs it, fails loudly, leaves the elapsed microseconds in $us.
us=0
timed_cni() {
  local t0=${EPOCHREALTIME/./}
  cni "$@" || die "$1 $3 $4 failed: $(cat "$7") $(tail -n 3 "$work/stderr.log")"
  us=$((${EPOCHREALTIME/./} - t0))
}

# stats FILE: "median p99" in ms of the microsecond samples in FILE (p99 = the
# sample at rank round(0.99*(n-1)), as in ipam_bench.sh).
stats() {
  sort -n "$1" | awk '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    r = int(0.99 * (NR - 1) + 0.5) + 1
    printf "%.2f %.2f\n", m / 1000, v[r] / 1000 }'
}
median_ms() { stats "$1" | cut -d' ' -f1; }

# ============================================================================
# 1. Per-call latency
# ============================================================================
dev_a="${tag}a" dev_b="${tag}b" dev_c="${tag}c"
ns_a="${tag}-a" ns_b="${tag}-b" ns_c="${tag}-c"
for x in a b c; do
  make_pair "${tag}$x"
  make_netns "${tag}-$x"
done
conf_a="$(conf_ours "$dev_a" 198.18.0.0/24)"
conf_b="$(conf_ref "$dev_b" 198.18.1.0/24)"

# (c) The floor. A netns move must be sent from a socket in the source netns,
# and "set up" and "add address" from one in the pod's netns, and `ip -batch`
# cannot switch netns between lines; so there are two long-lived processes,
# `ip -batch -` in the host and `ip -n POD -batch -`, started once and fed one
# cycle at a time: ADD = host: move+rename (one RTM_NEWLINK, as rdmanet sends
# it), then pod: up, add address; DEL = pod: move back under the old name (the
# kernel downs the link and flushes its addresses on the move). Per-call times
# are needed for median/p99, and the pod's lines may only go after the move
# is done, so each step ends with a marker line: "zz" is no ip object, so
# ip answers on stderr without any netlink request and, with -force, goes on.
# Waiting for that answer is the only overhead beyond the kernel's work; it is
# measured on its own below (sync_us). Timing a whole N-cycle batch instead
# would have no per-call spread and would still need the same cross-netns sync.
mkfifo "$work/host.in" "$work/host.err" "$work/pod.in" "$work/pod.err"
ip -force -batch - <"$work/host.in" >/dev/null 2>"$work/host.err" &
ip_pids+=("$!")
exec {host_w}>"$work/host.in" {host_r}<"$work/host.err"
ip -n "$ns_c" -force -batch - <"$work/pod.in" >/dev/null 2>"$work/pod.err" &
ip_pids+=("$!")
exec {pod_w}>"$work/pod.in" {pod_r}<"$work/pod.err"

# batch WRITE_FD READ_FD LINE...: sends the lines and the marker, waits for the
# marker's answer; any other answer is a failed command.
batch() {
  local w=$1 r=$2 line
  shift 2
  printf '%s\n' "$@" zz >&"$w"
  while IFS= read -r -u "$r" line; do
    case "$line" in
      'Object "zz" is unknown'*) IFS= read -r -u "$r" line && return 0 ;; # + "Command failed -:N"
      *) die "ip -batch: $line" ;;
    esac
  done
  die "ip -batch exited"
}
floor_add() {
  batch "$host_w" "$host_r" "link set dev $dev_c netns $ns_c name eth0"
  batch "$pod_w" "$pod_r" "link set dev eth0 up" "address add 198.18.2.2/24 dev eth0"
}
floor_del() { batch "$pod_w" "$pod_r" "link set dev eth0 netns $$ name $dev_c"; }

# One ADD+DEL cycle of each contender, checked (result address, link gone
# from / back in the host) outside the timed part.
out="$work/out.json"
# cycle_plugin TAG NAME PLUGIN CNI_PATH NETNS CONF DEVICE ADDR_PREFIX ID
cycle_plugin() {
  timed_cni "$3" "$4" ADD "c$9" "$5" "$6" "$out"
  echo "$us" >>"$work/$1.add"
  [[ "$(<"$out")" == *"\"$8"* && ! -e "/sys/class/net/$7" ]] || die "$2 ADD $9: $(<"$out")"
  timed_cni "$3" "$4" DEL "c$9" "$5" "$6" "$out"
  echo "$us" >>"$work/$1.del"
  [[ -e "/sys/class/net/$7" ]] || die "$2 DEL $9 left $7 in the pod"
}
cycle_a() { cycle_plugin a rdmanet "$ours" "$work/bin" "$ns_a" "$conf_a" "$dev_a" 198.18.0. "$1"; }
cycle_b() {
  cycle_plugin b host-device "$REF_DIR/host-device" "$REF_DIR" "$ns_b" "$conf_b" "$dev_b" 198.18.1. "$1"
}
cycle_c() {
  local t0=${EPOCHREALTIME/./}
  floor_add
  echo "$((${EPOCHREALTIME/./} - t0))" >>"$work/c.add"
  [[ ! -e "/sys/class/net/$dev_c" ]] || die "floor ADD $1 left $dev_c in the host"
  t0=${EPOCHREALTIME/./}
  floor_del
  echo "$((${EPOCHREALTIME/./} - t0))" >>"$work/c.del"
  [[ -e "/sys/class/net/$dev_c" ]] || die "floor DEL $1 left $dev_c in the pod"
}

echo "1/3 latency: $CYCLES cycles each, interleaved (0.2-0.4 s per round)" >&2
for i in 1 2 3; do # warm-up: page cache, first directories and fsyncs; not measured
  cycle_a "w$i"
  cycle_b "w$i"
  cycle_c "w$i"
done
rm -f "$work"/[abc].add "$work"/[abc].del
start_disk_load "$work"
# The order rotates every round, so machine noise and "who goes right after
# whom" effects hit all three alike.
for ((i = 0; i < CYCLES; i++)); do
  case $((i % 3)) in
    0) cycle_a "$i"; cycle_b "$i"; cycle_c "$i" ;;
    1) cycle_b "$i"; cycle_c "$i"; cycle_a "$i" ;;
    2) cycle_c "$i"; cycle_a "$i"; cycle_b "$i" ;;
  esac
done
stop_disk_load
# The floor's own sync cost: the same marker round trips with no request.
for ((i = 0; i < CYCLES; i++)); do
  t0=${EPOCHREALTIME/./}
  batch "$host_w" "$host_r"
  batch "$pod_w" "$pod_r"
  echo "$((${EPOCHREALTIME/./} - t0))" >>"$work/sync"
done

# Peak RSS: GNU time's %M is the maximum of the plugin and the children it
# waited for (its IPAM plugin), i.e. the largest process of the call. Measured
# on extra calls so that time's own fork does not enter the latencies.
rss_of() { # rss_of PLUGIN CNI_PATH COMMAND CID NETNS CONF: peak KB of one call
  CNI_COMMAND="$3" CNI_CONTAINERID="$4" CNI_NETNS="/run/netns/$5" CNI_IFNAME=eth0 CNI_PATH="$2" \
    /usr/bin/time -f %M -o "$work/rss" "$1" <<<"$6" >/dev/null 2>>"$work/stderr.log" || die "$1 $3 under time failed"
  tail -n 1 "$work/rss"
}
max_rss() { # max_rss PLUGIN CNI_PATH NETNS CONF: "ADD DEL" peak KB over 3 cycles
  local add=0 del=0 k i
  for i in 1 2 3; do
    k=$(rss_of "$1" "$2" ADD "rss$i" "$3" "$4")
    if ((k > add)); then add=$k; fi
    k=$(rss_of "$1" "$2" DEL "rss$i" "$3" "$4")
    if ((k > del)); then del=$k; fi
  done
  echo "$add $del"
}
read -r rss_a_add rss_a_del < <(max_rss "$ours" "$work/bin" "$ns_a" "$conf_a")
read -r rss_b_add rss_b_del < <(max_rss "$REF_DIR/host-device" "$REF_DIR" "$ns_b" "$conf_b")
# IPAM plugins alone, for the record (same configs: they read only "ipam").
read -r rss_ai_add rss_ai_del < <(max_rss "$work/bin/rdmanet-ipam" "$work/bin" "$ns_a" "$conf_a")
read -r rss_bi_add rss_bi_del < <(max_rss "$REF_DIR/host-local" "$REF_DIR" "$ns_b" "$conf_b")
rss_c=0
for p in "${ip_pids[@]}"; do
  k=$(awk '/^VmHWM/ { print $2 }' "/proc/$p/status")
  if ((k > rss_c)); then rss_c=$k; fi
done

# ============================================================================
# 2. Burst: BURST attachments launched at once
# ============================================================================
echo "2/3 burst of $BURST" >&2
for ((i = 0; i < BURST; i++)); do
  make_pair "${tag}x$i"
  make_netns "${tag}-x$i"
done

# burst NAME PLUGIN CNI_PATH SUBNET_PREFIX CONF_FN: ADD all at once, check,
# DEL all at once, check; leaves the wall times (ms) in burst_add/burst_del
# and the number of distinct addresses in burst_n. Configs are made before
# the clock starts, and each call is a plain `cmd &` (one fork, then exec), so
# the launch loop costs both sides alike. Runs in this shell, not a subshell,
# so that the EXIT trap knows the pids.
burst_add=0 burst_del=0 burst_n=0
burst() {
  local name=$1 plugin=$2 path=$3 prefix=$4 conf_fn=$5 cmd t0 i rc addr got
  local -a confs
  for ((i = 0; i < BURST; i++)); do confs[i]="$($conf_fn "${tag}x$i" "$prefix.0/24")"; done
  for cmd in ADD DEL; do
    burst_pids=()
    rc=0
    t0=${EPOCHREALTIME/./}
    for ((i = 0; i < BURST; i++)); do
      CNI_COMMAND=$cmd CNI_CONTAINERID="burst$i" CNI_NETNS="/run/netns/${tag}-x$i" CNI_IFNAME=eth0 \
        CNI_PATH="$path" "$plugin" <<<"${confs[i]}" >"$work/burst.$cmd.$i" 2>>"$work/stderr.log" &
      burst_pids+=("$!")
    done
    for ((i = 0; i < BURST; i++)); do
      wait "${burst_pids[i]}" || { rc=$? && echo "$name $cmd burst$i failed ($rc): $(<"$work/burst.$cmd.$i")" >&2; }
    done
    ((rc == 0)) || die "$name burst $cmd failed; see above"
    if [[ $cmd == ADD ]]; then
      burst_add=$(((${EPOCHREALTIME/./} - t0) / 1000))
      # Every result has one address in the range, all distinct, and each pod
      # really carries the address its result names.
      for ((i = 0; i < BURST; i++)); do
        addr=$(grep -o "\"$prefix\.[0-9]*/24\"" "$work/burst.ADD.$i" | tr -d '"') ||
          die "$name burst$i: no address in $(<"$work/burst.ADD.$i")"
        got=$(ip -n "${tag}-x$i" -4 -o addr show dev eth0 | awk '{ print $4 }')
        [[ "$got" == "$addr" ]] || die "$name burst$i: result says $addr, pod has '$got'"
        echo "$addr"
      done >"$work/burst.addrs"
      burst_n=$(sort -u "$work/burst.addrs" | wc -l)
      ((burst_n == BURST)) || die "$name burst: only $burst_n distinct addresses for $BURST pods"
    else
      burst_del=$(((${EPOCHREALTIME/./} - t0) / 1000))
      for ((i = 0; i < BURST; i++)); do
        [[ -e "/sys/class/net/${tag}x$i" ]] || die "$name burst DEL left ${tag}x$i in its pod"
      done
    fi
  done
  burst_pids=()
}
# The reference goes first so that rdmanet does not profit from its warm-up.
burst host-device "$REF_DIR/host-device" "$REF_DIR" 198.18.17 conf_ref
bb_add=$burst_add bb_n=$burst_n bb_del=$burst_del
burst rdmanet "$ours" "$work/bin" 198.18.16 conf_ours
ba_add=$burst_add ba_n=$burst_n ba_del=$burst_del

# ============================================================================
# 3. Where one rdmanet ADD spends its time
# ============================================================================
echo "3/3 strace of $TRACE_RUNS rdmanet ADDs" >&2
# Process start without strace: CNI_COMMAND=VERSION does nothing but start,
# answer and exit.
for b in "$ours" "$work/bin/rdmanet-ipam" "$REF_DIR/host-device" "$REF_DIR/host-local"; do
  f="$work/version.$(basename "$b")"
  for ((i = 0; i < VERSION_RUNS; i++)); do
    t0=${EPOCHREALTIME/./}
    CNI_COMMAND=VERSION "$b" </dev/null >/dev/null
    echo "$((${EPOCHREALTIME/./} - t0))" >>"$f"
  done
done

# trace_summary FILE: one line of key=ms from one `strace -f -ttt -T` of an ADD.
# Durations are strace's <...> per syscall; spans are between timestamps.
# strace slows every syscall down, so read the shares, not the absolute ms.
trace_summary() {
  awk '
  {
    pid = $1; ts = $2 + 0; rest = $0; sub(/^[0-9]+ +[0-9.]+ +/, "", rest)
    if (main == "") { main = pid; t0 = ts }
    if (rest ~ /^\+\+\+ exited/) { if (pid == main) tend = ts; else cend = ts; next }
    if (rest ~ /^---/) next
    if (rest ~ /<unfinished \.\.\.>$/) { pend[pid] = rest; call = rest; dur = 0 }
    else if (rest ~ /^<\.\.\. /) { call = pend[pid]; dur = rest }
    else { call = rest; dur = rest }
    if (dur != 0) { sub(/.*</, "", dur); sub(/>$/, "", dur); dur += 0 }
    name = call; sub(/\(.*/, "", name)
    fd = call; sub(/^[a-z0-9_]+\(/, "", fd); sub(/[,)].*/, "", fd)
    if (rest ~ /<unfinished \.\.\.>$/ && name !~ /^(clone|clone3|vfork)$/) next
    if (after_eof && pid == main) { parse = ts - eof; after_eof = 0 }
    if (pid == main) {
      nsys++
      if (name == "read" && fd == "0" && cfg == "") cfg = ts
      if (name == "read" && fd == "0" && rest ~ /= 0 </) { eof = ts + dur; after_eof = 1 }
      if (name == "socket" && call ~ /AF_NETLINK/) {
        if (rest ~ /= [0-9]+ </) { r = rest; sub(/.*= /, "", r); sub(/ .*/, "", r); nl[r] = 1 }
        if (call ~ /NETLINK_RDMA/ && rest ~ /EPROTONOSUPPORT/) nordma = 1
      }
      if (name == "close" && fd in nl) delete nl[fd]
      if ((name == "sendmsg" || name == "recvmsg") && fd in nl) {
        netlink += dur; if (name == "sendmsg") { nreq++; if (dur > nlmax) nlmax = dur }
      }
      if (name ~ /^(fsync|fdatasync)$/) { fs += dur; nfs++ }
      if (name == "setns") { setns += dur; nsetns++ }
      if (name ~ /^(clone|clone3|vfork)$/ && spawn == "") spawn = ts
      if (name == "wait4" && rest !~ /unfinished/) wend = ts + dur
    } else {
      if (name == "read" && fd == "0" && ccfg == "") ccfg = ts
      if (name ~ /^(fsync|fdatasync)$/) { cfs += dur; ncfs++ }
    }
  }
  END {
    printf "total=%.3f start=%.3f parse=%.3f netlink=%.3f nreq=%d nlmax=%.3f setns=%.3f nsetns=%d",
      (tend - t0) * 1e3, (cfg - t0) * 1e3, parse * 1e3, netlink * 1e3, nreq, nlmax * 1e3, setns * 1e3, nsetns
    printf " fsync=%.3f nfsync=%d ipam=%.3f ipam_start=%.3f ipam_fsync=%.3f nipam_fsync=%d nordma=%d nsys=%d\n",
      fs * 1e3, nfs, (wend - spawn) * 1e3, (ccfg - spawn) * 1e3, cfs * 1e3, ncfs, nordma, nsys
  }' "$1"
}

for ((i = 0; i < TRACE_RUNS; i++)); do
  CNI_COMMAND=ADD CNI_CONTAINERID="trace$i" CNI_NETNS="/run/netns/$ns_a" CNI_IFNAME=eth0 CNI_PATH="$work/bin" \
    strace -f -ttt -T -o "$work/trace.$i" "$ours" <<<"$conf_a" >/dev/null 2>>"$work/stderr.log" ||
    die "traced ADD failed: $(tail -n 3 "$work/stderr.log")"
  trace_summary "$work/trace.$i" >>"$work/traces"
  cni "$ours" "$work/bin" DEL "trace$i" "$ns_a" "$conf_a" /dev/null || die "DEL after trace failed"
done
# tk KEY: the median over the traced runs of KEY.
tk() { tr ' ' '\n' <"$work/traces" | sed -n "s/^$1=//p" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# ============================================================================
# Report
# ============================================================================
read -r a_am a_a99 < <(stats "$work/a.add")
read -r a_dm a_d99 < <(stats "$work/a.del")
read -r b_am b_a99 < <(stats "$work/b.add")
read -r b_dm b_d99 < <(stats "$work/b.del")
read -r c_am c_a99 < <(stats "$work/c.add")
read -r c_dm c_d99 < <(stats "$work/c.del")
fs_type=$(df -T "$work" | awk 'NR == 2 { print $2 }')
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
verdict() { awk -v r="$1" -v t="$2" 'BEGIN { print (r <= t) ? "met" : "NOT met" }'; }

echo
echo "## Attach latency: veth end into a pod netns, fork+exec per call, $(nproc) CPUs, $(uname -r), state on $fs_type, $(disk_load_label)"
echo
echo "| | ADD median / p99 (ms) | DEL median / p99 (ms) | peak RSS ADD / DEL (KB) | cycles |"
echo "|---|---:|---:|---:|---:|"
echo "| (a) rdmanet + rdmanet-ipam | $a_am / $a_a99 | $a_dm / $a_d99 | $rss_a_add / $rss_a_del | $CYCLES |"
echo "| (b) host-device + host-local (Debian $(dpkg-query -W -f '${Version}' containernetworking-plugins 2>/dev/null || echo '?')) | $b_am / $b_a99 | $b_dm / $b_d99 | $rss_b_add / $rss_b_del | $CYCLES |"
echo "| (c) kernel floor: ip -batch, no process start | $c_am / $c_a99 | $c_dm / $c_d99 | $rss_c (VmHWM of ip) | $CYCLES |"
echo
echo "Peak RSS is the largest process of a call (the plugin or its IPAM child)."
echo "IPAM alone, peak RSS ADD / DEL (KB): rdmanet-ipam $rss_ai_add / $rss_ai_del, host-local $rss_bi_add / $rss_bi_del."
echo "The floor includes $(median_ms "$work/sync") ms median of shell<->ip pipe sync per ADD (two marker round trips)."
echo
r_ab=$(ratio "$a_am" "$b_am")
r_ac=$(ratio "$a_am" "$c_am")
echo "ADD median a/b = $r_ab (target <= 0.20): $(verdict "$r_ab" 0.20)"
echo "ADD median a/c = $r_ac (target <= 2.00): $(verdict "$r_ac" 2.00)"
echo "ADD median c/b = $(ratio "$c_am" "$b_am") (the floor against the reference, for scale)"
echo "DEL median a/b = $(ratio "$a_dm" "$b_dm"), a/c = $(ratio "$a_dm" "$c_dm")"
echo "ADD p99 a/b = $(ratio "$a_a99" "$b_a99") (target <= 1.00 with DISK_LOAD=1), DEL p99 a/b = $(ratio "$a_d99" "$b_d99")"
echo
echo "## Burst: $BURST attachments (veth pairs, pod netns) launched at once"
echo
echo "| | $BURST ADDs wall (ms) | distinct addresses, all in the pods | $BURST DELs wall (ms) |"
echo "|---|---:|---:|---:|"
echo "| (a) rdmanet + rdmanet-ipam | $ba_add | $ba_n / $BURST | $ba_del |"
echo "| (b) host-device + host-local | $bb_add | $bb_n / $BURST | $bb_del |"
echo
echo "burst ADD wall a/b = $(ratio "$ba_add" "$bb_add"), DEL wall a/b = $(ratio "$ba_del" "$bb_del")"
echo
echo "## One rdmanet ADD, median of $TRACE_RUNS runs under strace -f -ttt -T (strace inflates syscalls: read the shares)"
echo
total=$(tk total)
row() { # row LABEL MS NOTE
  printf '| %s | %.2f | %s%% | %s |\n' "$1" "$2" "$(awk -v a="$2" -v t="$total" 'BEGIN { printf "%.0f", 100 * a / t }')" "$3"
}
other=$(awk -v t="$total" -v s="$(tk start)" -v p="$(tk parse)" -v n="$(tk netlink)" -v x="$(tk setns)" \
  -v f="$(tk fsync)" -v i="$(tk ipam)" 'BEGIN { printf "%.3f", t - s - p - n - x - f - i }')
gid_note="none: this kernel has no RDMA subsystem"
[[ "$(tk nordma)" == 1 ]] && gid_note="none: socket(NETLINK_RDMA) = EPROTONOSUPPORT, no RDMA subsystem on this host, so no GID table to wait for"
echo "| step | ms | share | what |"
echo "|---|---:|---:|---|"
row "process start" "$(tk start)" "execve, dynamic linking, static init, up to the first read of stdin"
row "config read + parse + validate" "$(tk parse)" "stdin EOF to the first syscall after it"
row "netlink requests" "$(tk netlink)" "$(tk nreq) requests (sendmsg+recvmsg); the largest, $(tk nlmax) ms, is the netns move"
row "fsync/fdatasync in rdmanet" "$(tk fsync)" "$(tk nfsync) calls: attachment state and device hold, before and after"
row "setns" "$(tk setns)" "$(tk nsetns) calls"
row "IPAM exec (spawn to wait4)" "$(tk ipam)" "of which spawn + exec + start of rdmanet-ipam (to its read of stdin) $(tk ipam_start) ms, its fsync/fdatasync $(tk ipam_fsync) ms ($(tk nipam_fsync) calls)"
row "GID wait" 0 "$gid_note"
row "other" "$other" "CPU and waiting for a CPU between rdmanet's $(tk nsys) syscalls (strace stops at each), locks, state files, sysctls, gratuitous ARP"
row "total (traced)" "$total" "untraced median ADD above: $a_am ms"
echo
echo "Process start alone, CNI_COMMAND=VERSION, no strace, median of $VERSION_RUNS (ms): rdmanet $(median_ms "$work/version.rdmanet"),"\
  "rdmanet-ipam $(median_ms "$work/version.rdmanet-ipam"), host-device $(median_ms "$work/version.host-device"),"\
  "host-local $(median_ms "$work/version.host-local")"
