#!/bin/sh
# Fault injection (issue #7 item 6): ADD is killed with SIGKILL right after
# each of its steps, in rdmanet and in the IPAM plugin it calls; then DEL, and
# DEL again, must leave the node exactly as it was before ADD: the device back
# in the host under its name, with its MAC, MTU, admin state, alias and
# altname; the pod netns as it was; no attachment state, hold or lease.
#
# The crash comes from outside; the product has no hook for it. strace kills
# the real binary on entry to a chosen system call, before the call runs (the
# kernel skips a call when a fatal signal is pending at its entry):
# `-e inject=SYSCALL:signal=KILL:when=J`. strace counts J per syscall and per
# traced process, not across a set of syscalls, so a crash point is one
# (syscall, J) pair, read from a recorded complete ADD:
# - A point is the entry of a call that changes what DEL or an observer can
#   see: a file or directory created, linked, renamed or removed; a netlink
#   request other than a GET; a sysctl, an index word or a result written; the
#   IPAM plugin spawned or handed its config. Killing before any other call
#   (reads, netlink GETs, setns, fsync/fdatasync, which matter only on power
#   loss) leaves what killing before the next point leaves: a repeat.
# - rdmanet is traced without -f, and the IPAM plugin, for its ADD only, under
#   its own strace started by a wrapper in CNI_PATH. With -f, the rollback's
#   IPAM DEL would be a new tracee with fresh counters and be killed as well,
#   and the parent's earlier calls of a syscall both use (mkdir, openat) would
#   take the kill meant for the child.
# rdmanet killed while its IPAM plugin runs takes the plugin with it (its
# parent-death signal); the test still waits for it to be gone before DEL.
#
# Then DEL under transient errors (issue #15 item 8): after a complete ADD,
# strace makes one lookup of DEL fail (`-e inject=SYSCALL:error=E:when=J`):
# each call, in rdmanet and in the IPAM plugin's DEL, that reads what DEL
# decides on (netlink requests and replies, files and directories opened,
# read, stat'ed or listed, namespace ioctls and setns, sockets made), with the
# error a real transient failure of that call gives (ENOBUFS on a netlink
# socket, EMFILE on open, EIO on read, ENOMEM on stat). DEL may fail then
# (with a CNI error); if it says 0, the node must already be as before ADD;
# either way a DEL without errors after it must finish the job. "Could not
# look" must never be taken for "gone". A point the DEL did not reach (a busy
# host can change how many calls it makes) is run again, up to three times; a
# point never reached fails.
#
# Two ways to run IPAM (issue #27): with "type": "rdmanet-ipam" rdmanet runs the
# allocator in its own process (MODE in-process, the default), so the IPAM
# store's writes are crash points and lookups of rdmanet itself, and no
# rdmanet-ipam process may be started; MODE exec names the same binary
# "rdmanet-ipam-exec" in CNI_PATH, so rdmanet execs it as any IPAM plugin,
# and its own calls are points of their own, as before.
# Usage: fault_injection_test.sh RDMANET_BINARY RDMANET_IPAM_BINARY [in-process|exec]
set -eu
[ $# -eq 2 ] || [ $# -eq 3 ] || {
  echo "usage: $0 RDMANET_BINARY RDMANET_IPAM_BINARY [in-process|exec]" >&2
  exit 2
}
rdmanet=$1
ipam=$2
mode=${3:-in-process}
case $mode in
  in-process) ipam_type=rdmanet-ipam ;;
  exec) ipam_type=rdmanet-ipam-exec ;;
  *) echo "FAIL: unknown mode $mode" >&2; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "FAIL: needs root (netns, links); it does not skip" >&2; exit 1; }
for tool in strace ip awk diff; do
  command -v $tool >/dev/null || { echo "FAIL: $tool missing (tests/tools/deps.sh installs it)" >&2; exit 1; }
done
for bin in "$rdmanet" "$ipam"; do
  [ -x "$bin" ] || { echo "FAIL: $bin is not an executable" >&2; exit 1; }
done
# Sanitizer builds (tests/run.sh runs this test on one too): their leak
# checker cannot run under ptrace; address and UB checks still do.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

start=$(date +%s)
work=$(mktemp -d /tmp/rdmanet-fault.XXXXXX)
port=rdfi$$a # the "NIC" ADD moves into the pod: one end of a veth pair
peer=rdfi$$b # stays in the host; deleting it deletes the port wherever that is
pod=rdmanet-fault-$$
ifname=rdfi$$p
net=fault$$

drop_node() {
  printf 'link del %s\nnetns del %s\n' "$peer" "$pod" | ip -force -batch - 2>/dev/null || true
}
# Pids of IPAM plugins of ours still running, from the files the CNI_PATH
# wrapper writes them to (comm is checked in case a pid was reused).
our_ipam() {
  for file in "$@"; do
    [ -f "$file" ] || continue
    while read -r pid; do
      stat=""
      { read -r stat <"/proc/$pid/stat"; } 2>/dev/null || true
      case $stat in *"(rdmanet-ipam) "[!Z]* | *"(strace) "[!Z]*) echo "$pid" ;; esac
    done <"$file"
  done
}
cleanup() {
  set +e
  for pid in $(our_ipam "$work"/*/ipam.pids); do kill -9 "$pid"; done
  drop_node
  [ -n "${FAULT_KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# CNI_PATH: the real IPAM plugin, under strace for its ADD when the run's
# ipam.strace holds strace options.
mkdir "$work/bin"
cat >"$work/bin/$ipam_type" <<EOF
#!/bin/sh
echo \$\$ >>"\$FAULT_RUN/ipam.pids"
if [ "\$CNI_COMMAND" = ADD ] && [ -f "\$FAULT_RUN/ipam.strace" ]; then
  exec strace \$(cat "\$FAULT_RUN/ipam.strace") "$ipam"
fi
if [ "\$CNI_COMMAND" = DEL ] && [ -f "\$FAULT_RUN/ipam-del.strace" ]; then
  opts=\$(cat "\$FAULT_RUN/ipam-del.strace")
  rm -f "\$FAULT_RUN/ipam-del.strace" # the first DEL only
  exec strace \$opts "$ipam"
fi
exec "$ipam"
EOF
chmod 755 "$work/bin/$ipam_type"

# Name, MAC, MTU, admin state, alias and altnames of the port in the host.
port_snapshot() {
  ip -o link show dev "$port" 2>/dev/null | awk -F'\\\\ +' '{
    split($1, w, " "); name = w[2]; sub(/@.*/, "", name); sub(/:$/, "", name)
    admin = w[3] ~ /[<,]UP[,>]/ ? "up" : "down"
    for (i = 1; i in w; i++) if (w[i] == "mtu") mtu = w[i + 1]
    for (i = 2; i <= NF; i++) {
      if ($i ~ /^link\//) { split($i, l, " "); mac = l[2] }
      if ($i ~ /^alias /) alias = substr($i, 7)
      if ($i ~ /^altname /) alt = alt (alt == "" ? "" : ",") substr($i, 9)
    }
    printf "name=%s mac=%s mtu=%s %s alias=%s altnames=%s\n", name, mac, mtu, admin, alias, alt
  }'
}
# Links, addresses, routes (every table) and rules of the pod netns. IPv6
# routes need a link and an address, which this lists.
pod_snapshot() {
  printf 'link show\naddr show\nroute show table all\nrule show\n' | ip -n "$pod" -o -batch -
  ip -n "$pod" -6 rule show
}

# A fresh node for run $1: the port (up, MTU 1450, an alias, an altname), an
# empty pod netns, empty state and IPAM directories.
new_node() {
  drop_node
  run=$work/$1
  mkdir -p "$run/state" "$run/ipam"
  printf '%s\n' "link add $port type veth peer name $peer" "link set dev $peer up" \
    "link property add dev $port altname rdmanet-fault-$$-altname" \
    "link set dev $port mtu 1450 alias rdmanet-fault-$$-alias up" "netns add $pod" | ip -batch -
  printf '%s\n' "{\"cniVersion\": \"1.1.0\", \"name\": \"$net\", \"type\": \"rdmanet\"," \
    " \"device\": \"$port\", \"mtu\": 1400, \"mac\": \"02:00:0a:c9:00:99\", \"stateDir\": \"$run/state\"," \
    " \"podInfoDir\": \"$run/pods\"," \
    " \"ipam\": {\"type\": \"$ipam_type\", \"dataDir\": \"$run/ipam\"," \
    "   \"ranges\": [[{\"subnet\": \"10.201.0.0/24\"}]], \"routes\": [{\"dst\": \"10.202.0.0/16\"}]}}" \
    >"$run/conf.json"
  port_before=$(port_snapshot)
  read -r port_index <"/sys/class/net/$port/ifindex"
  pod_snapshot >"$run/pod.before"
  problems=""
}

# plugin COMMAND [PREFIX...]: rdmanet on the run's config; stdout in $run/COMMAND.out.
plugin() {
  cmd=$1
  shift
  FAULT_RUN=$run CNI_COMMAND=$cmd CNI_CONTAINERID=ctr$$ CNI_NETNS=/run/netns/$pod \
    CNI_IFNAME=$ifname CNI_PATH=$work/bin CNI_ARGS="K8S_POD_UID=uid-$$" \
    "$@" "$rdmanet" <"$run/conf.json" >"$run/$cmd.out" 2>>"$run/err"
}

problem() { problems="${problems:+$problems; }$*"; }

# Files among the arguments, temporaries and unmatched globs aside.
count() {
  c=0
  for f in "$@"; do
    case $f in *.tmp | *'*'*) ;; *) c=$((c + 1)) ;; esac
  done
  echo $c
}

# What the crash left, in a few words.
left() {
  where=host
  if ! ip link show dev "$port" >/dev/null 2>&1; then
    where=$(ip -n "$pod" -o link show | awk -F': ' '$2 != "lo" { sub(/@.*/, "", $2); print "pod:" $2 }')
  fi
  phase=$(sed -n 's/.*"phase": *"\([a-z]*\)".*/\1/p' "$run/state/$net"/*.json 2>/dev/null || true)
  echo "device ${where:-gone}, state ${phase:-none}, $(count "$run/state/holds"/*) hold," \
    "$(count "$run/ipam/$net/leases"/[0-9]*) lease"
}

# Everything DEL must have restored.
verify() {
  now=$(port_snapshot)
  if [ -z "$now" ]; then
    problem "$port not in the host"
  elif [ "$now" != "$port_before" ]; then
    problem "$port: $(printf '%s\n%s\n' "$port_before" "$now" | awk '
      NR == 1 { n = split($0, b, " ") } NR == 2 { split($0, a, " ")
        for (i = 1; i <= n; i++) if (a[i] != b[i]) { printf "%s%s -> %s", s, b[i], a[i]; s = ", " } }')"
  fi
  pod_snapshot >"$run/pod.after"
  if ! diff -q "$run/pod.before" "$run/pod.after" >/dev/null; then
    problem "pod netns: $(diff "$run/pod.before" "$run/pod.after" | grep '^[<>]' | head -n 2)"
  fi
  for name in "$ifname" "rdmanet$port_index"; do
    if ip link show dev "$name" >/dev/null 2>&1; then problem "$name in the host"; fi
  done
  # Lock files and the IPAM range index (a hint) may stay; nothing else may, and the pod's
  # rails directory goes with its last rail.
  files=$(cd "$run" && find state ipam pods -mindepth 1 ! -type d ! -path 'state/locks/*.lock' \
    ! -path "ipam/$net/lock" ! -path "ipam/$net/index/[0-9]*" ! -path pods/.lock 2>/dev/null |
    tr '\n' ' ')
  [ ! -e "$run/pods/uid-$$" ] || files="$files pods/uid-$$"
  [ -z "$files" ] || problem "left behind: $files"
  [ -z "$(our_ipam "$run/ipam.pids")" ] || problem "IPAM plugin still running"
}

# DEL twice (both must succeed), verify, print the verdict.
del_twice_and_verify() {
  for d in 1 2; do
    rc=0
    plugin DEL || rc=$?
    [ $rc -eq 0 ] || problem "DEL #$d exited $rc: $(cat "$run/DEL.out")"
  done
  verify
  if [ -z "$problems" ]; then
    echo "$1 | PASS"
    passed=$((passed + 1))
  else
    echo "$1 | FAIL: $problems"
    failed=$((failed + 1))
  fi
}

# The crash points of a recorded process (strace -y, no -f): "SYSCALL J WHAT"
# per line, J counting that syscall's calls from 1 as when= does.
crash_points() {
  awk '
    function hex(s, v, i) {
      v = 0; s = tolower(s); sub(/^0x/, "", s)
      for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
      return v
    }
    function base(p) { sub(/\/$/, "", p); sub(/.*\//, "", p); return substr(p, 1, 20) }
    function lastarg(s, r) {
      s = $0; sub(/\) += [^"]*$/, "", s)
      while (match(s, /"[^"]*"/)) { r = substr(s, RSTART + 1, RLENGTH - 2); s = substr(s, RSTART + RLENGTH) }
      return base(r)
    }
    function fd(s) { s = $0; sub(/^[a-z0-9_]+\(/, "", s); sub(/[<,].*/, "", s); return s }
    function fdpath(s) { s = $0; sub(/^[a-z0-9_]+\([0-9]+</, "", s); sub(/>.*/, "", s); return s }
    !/^[a-z0-9_]+\(/ { next }
    {
      name = $0; sub(/\(.*/, "", name); j = ++count[name]; what = ""
      ok = $0 !~ / = -1 [A-Z]+ / && $0 !~ / = \?$/
      if (name ~ /^(mkdir|mkdirat|rmdir|rename|renameat|renameat2|link|linkat|unlink|unlinkat|symlink|symlinkat)$/) {
        if (ok) what = lastarg()
      } else if (name ~ /^(open|openat|creat)$/) {
        if (ok && /O_CREAT/) what = "new " lastarg()
      } else if (name ~ /^(write|writev|pwrite64|pwritev|pwritev2)$/) {
        if (fd() == 1) what = "result"
        else if (fdpath() ~ /^pipe:/) what = "config to IPAM"
        else if (fd() != 2 && fdpath() !~ /[.]tmp/) what = base(fdpath())
      } else if (name ~ /^(sendmsg|sendto|sendmmsg)$/ && match($0, /nlmsg_type=[A-Za-z0-9_]+/)) {
        # strace names the types on sockets of its own netns, gives numbers in the pod.
        t = substr($0, RSTART + 11, RLENGTH - 11)
        if (t ~ /^0x/) {
          v = hex(t); get = v >= 16 && v < 128 && v % 4 == 2 # RTM_GET*
          t = v == 16 ? "NEWLINK" : v == 17 ? "DELLINK" : v == 19 ? "SETLINK" : v == 20 ? "NEWADDR" : \
              v == 24 ? "NEWROUTE" : v == 109 ? "DELLINKPROP" : "netlink " v
        } else {
          sub(/^RTM_/, "", t); get = t ~ /GET/
        }
        if (!get) what = t
      } else if (name ~ /^(clone|clone3|fork|vfork)$/) {
        what = "spawn IPAM"
      }
      if (what != "") print name, j, what
    }' "$1"
}

passed=0
failed=0

# Run 0: a complete ADD, recorded, undone by DEL twice. Its record gives the points.
new_node 0
echo "-qq -y -e signal=none -o $run/ipam.rec" >"$run/ipam.strace"
rc=0
plugin ADD strace -qq -y -e signal=none -o "$run/rdmanet.rec" || rc=$?
[ $rc -eq 0 ] || { echo "FAIL: the recorded ADD failed ($rc): $(cat "$run/ADD.out" "$run/err")" >&2; exit 1; }
if [ "$mode" = exec ]; then
  [ -s "$run/ipam.rec" ] || { echo "FAIL: the IPAM plugin's ADD was not recorded" >&2; exit 1; }
else
  [ ! -e "$run/ipam.pids" ] || { echo "FAIL: rdmanet exec'd rdmanet-ipam, which it runs in process" >&2; exit 1; }
  # The lease's link(2) is the IPAM store's: its writes are rdmanet's crash points now.
  grep -q '^linkat(' "$run/rdmanet.rec" || { echo "FAIL: no IPAM store write in rdmanet's ADD" >&2; exit 1; }
fi
{
  crash_points "$run/rdmanet.rec" | sed 's/^/rdmanet /'
  [ "$mode" = in-process ] || crash_points "$run/ipam.rec" | sed 's/^/rdmanet-ipam /'
} >"$work/points"
del_twice_and_verify "N=0  no crash                                     | left: $(left)"
points=$(wc -l <"$work/points")
[ "$points" -gt 0 ] || { echo "FAIL: no crash points in the record" >&2; exit 1; }

n=0
while read -r who syscall j what <&3; do
  n=$((n + 1))
  new_node "$n"
  trace=$run/$who.trace
  # Without -e signal=none: the trace must end with "+++ killed by SIGKILL +++".
  inject="-q -y -e trace=$syscall -e inject=$syscall:signal=KILL:when=$j -o $trace"
  rc=0
  if [ "$who" = rdmanet ]; then
    # shellcheck disable=SC2086 # $inject: options without spaces in them
    plugin ADD strace $inject || rc=$?
    [ $rc -eq 137 ] || problem "ADD exited $rc, not killed by SIGKILL"
  else
    echo "$inject" >"$run/ipam.strace"
    plugin ADD || rc=$?
    # rdmanet itself survives, reports the crash and rolls back.
    if [ $rc -eq 0 ] || ! grep -q 'killed by signal 9' "$run/ADD.out"; then
      problem "ADD exited $rc without reporting the IPAM plugin's SIGKILL: $(cat "$run/ADD.out")"
    fi
  fi
  i=0
  while [ -n "$(our_ipam "$run/ipam.pids")" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  # The injection happened, on entry to the J-th call of that syscall.
  if [ "$(tail -n 1 "$trace" 2>/dev/null)" != "+++ killed by SIGKILL +++" ] ||
    [ "$(grep -c "^$syscall(" "$trace")" -ne "$j" ] ||
    ! tail -n 2 "$trace" | head -n 1 | grep -q "^$syscall(.* = ?\$"; then
    problem "not killed on entry to $syscall#$j (see $trace)"
  fi
  del_twice_and_verify "$(printf 'N=%-3s %-12s %-10s %-22s' "$n" "$who" "$syscall#$j" "$what") | left: $(left)"
done 3<"$work/points"

echo "fault injection ($mode IPAM): $points crash points ($(grep -c '^rdmanet ' "$work/points") in rdmanet," \
  "$(grep -c '^rdmanet-ipam ' "$work/points") in rdmanet-ipam) and 1 run without crash:" \
  "$passed passed, $failed failed, $(($(date +%s) - start)) s"
add_failed=$failed

# DEL's lookups, from a recorded DEL: "SYSCALL J ERROR" per line.
lookups() {
  awk '
    BEGIN {
      split("sendmsg sendto recvmsg recvfrom socket bind getsockname setsockopt", a, " ")
      for (i in a) err[a[i]] = "ENOBUFS"
      split("open openat", a, " "); for (i in a) err[a[i]] = "EMFILE"
      split("read pread64 getdents64 ioctl", a, " "); for (i in a) err[a[i]] = "EIO"
      split("newfstatat fstat stat lstat statx fstatfs access setns", a, " ")
      for (i in a) err[a[i]] = "ENOMEM"
      err["flock"] = "ENOLCK"
    }
    !/^[a-z0-9_]+\(/ { next }
    # A DEL of ours starts when the binary reads its config (the first call on fd 0);
    # before that run the dynamic loader and, in a sanitizer build, the sanitizer
    # runtime (it reads /proc/self/*): their failures are not DEL lookups.
    {
      name = $0; sub(/\(.*/, "", name); j = ++count[name]
      if (!started && $0 ~ /^[a-z0-9_]+\(0</) started = 1
      if (started && name in err) print name, j, err[name]
    }' "$1"
}

new_node del
plugin ADD || { echo "FAIL: ADD before the recorded DEL failed: $(cat "$run/ADD.out")" >&2; exit 1; }
echo "-qq -y -e signal=none -o $run/ipam-del.rec" >"$run/ipam-del.strace"
rc=0
plugin DEL strace -qq -y -e signal=none -o "$run/rdmanet-del.rec" || rc=$?
[ $rc -eq 0 ] || { echo "FAIL: the recorded DEL failed ($rc): $(cat "$run/DEL.out")" >&2; exit 1; }
if [ "$mode" = exec ]; then
  [ -s "$run/ipam-del.rec" ] || { echo "FAIL: the IPAM plugin's DEL was not recorded" >&2; exit 1; }
else
  [ ! -e "$run/ipam.pids" ] || { echo "FAIL: rdmanet exec'd rdmanet-ipam, which it runs in process" >&2; exit 1; }
fi
{
  lookups "$run/rdmanet-del.rec" | sed 's/^/rdmanet /'
  [ "$mode" = in-process ] || lookups "$run/ipam-del.rec" | sed 's/^/rdmanet-ipam /'
} >"$work/lookups"
if [ -n "${FAULT_ONLY:-}" ]; then # e.g. FAULT_ONLY='^rdmanet recvmsg 9 ' to debug one point
  grep -E "$FAULT_ONLY" "$work/lookups" >"$work/only" || true
  mv "$work/only" "$work/lookups"
fi
lookup_count=$(wc -l <"$work/lookups")
[ "$lookup_count" -gt 0 ] || { echo "FAIL: no lookups in the recorded DEL" >&2; exit 1; }

# injected_del NAME WHO SYSCALL J ERROR: a fresh node, a complete ADD, then DEL with the
# J-th SYSCALL (of WHO) failing with ERROR, judged by what DEL answered (said 0: the node
# must be as before ADD; else a CNI error). $reached: whether the injection happened.
injected_del() {
  new_node "$1"
  rc=0
  plugin ADD || rc=$?
  [ $rc -eq 0 ] || problem "ADD exited $rc: $(cat "$run/ADD.out")"
  trace=$run/$2-del.trace
  inject="-q -y -e trace=$3 -e inject=$3:error=$5:when=$4 -o $trace"
  rc=0
  if [ "$2" = rdmanet ]; then
    # shellcheck disable=SC2086 # $inject: options without spaces in them
    plugin DEL strace $inject || rc=$?
  else
    echo "$inject" >"$run/ipam-del.strace"
    plugin DEL || rc=$?
  fi
  reached=0
  if grep -q "^$3(.*= -1 $5 (.*(INJECTED)" "$trace" 2>/dev/null; then reached=1; fi
  if [ $rc -eq 0 ]; then
    [ $reached -eq 0 ] || said_zero=$((said_zero + 1))
    verify # DEL said done: it must be
    verdict="DEL said 0"
  else
    grep -q '"code"' "$run/DEL.out" || problem "DEL exited $rc without a CNI error: $(cat "$run/DEL.out")"
    verdict="DEL said $(sed -n 's/.*"code": *\([0-9]*\).*/\1/p' "$run/DEL.out")"
  fi
  [ $reached -eq 1 ] || verdict="not reached"
  if [ -n "$problems" ]; then
    problems="after the injected DEL: $problems"
  fi
}

passed=0
failed=0
said_zero=0
retried=0
n=0
while read -r who syscall j error <&3; do
  n=$((n + 1))
  # A dump a concurrent link change interrupted is repeated, so a DEL on a busy host can
  # make fewer or more calls than the recorded one: a point it did not reach is tried again
  # on a fresh node (the plain DEL it was is verified all the same), up to three runs. A
  # point never reached fails: the recorded DEL is then not what DEL does.
  attempt=1
  while :; do
    injected_del "del$n.$attempt" "$who" "$syscall" "$j" "$error"
    [ $reached -eq 0 ] && [ $attempt -lt 3 ] || break
    del_twice_and_verify "$(printf 'D=%-3s %-12s %-12s %-8s %-12s' "$n" "$who" "$syscall#$j" "$error" "$verdict") (run $attempt)"
    retried=$((retried + 1))
    attempt=$((attempt + 1))
  done
  [ $reached -eq 1 ] || problem "not reached in $attempt runs: the recorded DEL is not what DEL does"
  del_twice_and_verify "$(printf 'D=%-3s %-12s %-12s %-8s %-12s' "$n" "$who" "$syscall#$j" "$error" "$verdict")"
done 3<"$work/lookups"

echo "fault injection in DEL: $lookup_count lookups failed once ($(grep -c '^rdmanet ' "$work/lookups")" \
  "in rdmanet, $(grep -c '^rdmanet-ipam ' "$work/lookups") in rdmanet-ipam; $retried runs again for a point" \
  "not reached); DEL said 0 on $said_zero: $passed passed, $failed failed, $(($(date +%s) - start)) s in all"
[ $add_failed -eq 0 ] && [ $failed -eq 0 ]
