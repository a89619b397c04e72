#!/bin/sh
# Runs on every MPI rank before NCCL: sets NCCL_IB_HCA, the GID selection (NCCL_IB_GID_INDEX,
# or NCCL_IB_ADDR_FAMILY and NCCL_IB_ADDR_RANGE), NCCL_SOCKET_IFNAME, UCX_NET_DEVICES,
# NCCL_CONF_FILE, UCX_CONFIG_DIR and RDMANET_RAIL<i>_* for the pod's RDMA rails (a variable
# the user set always wins), then execs the command. Two sources, the first that is there:
#
# 1. rdmanet's own account of the pod's rails: rdmanet writes <podInfoDir>/<pod UID>/rdma.env
#    (and nccl.conf, ucx.conf beside it) on the node (default podInfoDir /run/rdmanet/pods);
#    the hostPath workloads mount /run/rdmanet/pods with subPathExpr $(POD_UID) at
#    /run/rdmanet/pod. RDMA_ENV_FILE overrides the path.
# 2. Without hostPath (Pod Security "baseline"): the pod's k8s.v1.cni.cncf.io/network-status
#    annotation, which Multus writes from the CNI results, as a downwardAPI volume file
#    (NETWORK_STATUS_FILE, default /etc/podinfo/network-status), plus the pod's own
#    /sys/class/infiniband and /sys/class/net (RDMA_ENV_SYSFS: tests point it at a fake tree)
#    and /proc/net (RDMA_ENV_PROC) for the rails' subnets. Every secondary network (the
#    entry with "default": true is the cluster network) is a rail, in the annotation's order
#    (RDMA_IFNAMES="net2 net1" picks and orders them). Each rail's RDMA device: device-info's
#    pci.rdma-device, else the one under the netdev's PCI device, else the soft-RoCE device
#    whose parent is the netdev, else the device holding the RoCE v2 GID of the rail's
#    address (a macvlan child of a shared HCA); its GID index: the RoCE v2 GID of that
#    address. It writes nccl.conf and ucx.conf (and rdma.env) to RDMA_ENV_OUT (default
#    /tmp/rdmanet). The traffic class (NCCL_IB_TC) is the NAD's and is not in the
#    annotation: set it in the workload when the hostPath files are not mounted.
#    Kubelet fills the downwardAPI file from the annotation it knows when it sets the volume
#    up, which can be before Multus wrote it: an empty file is read again for RDMA_ENV_WAIT
#    seconds (default 90).
#
# GID selection (as rdmanet's rdma.env): rails whose RDMA device is the pod's own (a VF, PF
# or SF in the pod, a soft-RoCE device on the pod's netdev) get NCCL_IB_ADDR_FAMILY (and
# NCCL_IB_ADDR_RANGE when one subnet holds every rail), so NCCL finds each GID itself and a
# restarted process never needs an index; NCCL_IB_GID_INDEX only when rails sit on a device
# shared with other pods (macvlan child of a shared HCA) and all those rails have the same
# index. Nothing read from the files is ever evaluated: only [A-Z0-9_] names reach eval.
# POSIX sh and awk only (busybox is enough): workload images have no jq or python.
set -eu
sys=${RDMA_ENV_SYSFS:-/sys}
proc=${RDMA_ENV_PROC:-/proc}
envfile=${RDMA_ENV_FILE:-/run/rdmanet/pod/rdma.env}
statusfile=${NETWORK_STATUS_FILE:-/etc/podinfo/network-status}
out=${RDMA_ENV_OUT:-/tmp/rdmanet}

fail() {
  echo "rdma-env: $*" >&2
  exit 1
}
# set_default KEY VALUE: export KEY=VALUE unless the user set KEY already.
set_default() {
  case $1 in '' | *[!A-Z0-9_]*) return 0 ;; esac # only names, never code, reach eval
  eval "[ -n \"\${$1+x}\" ]" || export "$1=$2"
}
# Verbs pin registered memory (ibv_reg_mr) up to RLIMIT_MEMLOCK, unless the process has
# IPC_LOCK (which Pod Security baseline does not allow): say so on every rank when it is low.
memlock_check() {
  # shellcheck disable=SC3045 # dash, ash (busybox) and bash all have it; else "unknown"
  ml=$(ulimit -l 2>/dev/null || echo unknown)
  [ "$ml" = unlimited ] || echo "rdma-env: warning: RLIMIT_MEMLOCK is $ml kB: registering" \
    "NCCL's buffers fails without IPC_LOCK; give the container runtime LimitMEMLOCK=infinity" \
    "(containerd's systemd unit) or default_ulimits memlock=-1:-1 (CRI-O)" >&2
}
report() {
  echo "rdma-env: $(hostname 2>/dev/null || true): $1: NCCL_IB_HCA=${NCCL_IB_HCA:-}" \
    "NCCL_IB_GID_INDEX=${NCCL_IB_GID_INDEX:-} NCCL_IB_ADDR_FAMILY=${NCCL_IB_ADDR_FAMILY:-}" \
    "NCCL_IB_ADDR_RANGE=${NCCL_IB_ADDR_RANGE:-} NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-}" >&2
}

# --- 1. rdmanet's rdma.env -----------------------------------------------------------------
if [ -r "$envfile" ]; then
  while IFS='=' read -r key value; do
    case $key in '' | '#'*) continue ;; esac
    set_default "$key" "$value"
  done <"$envfile"
  dir=$(dirname "$envfile")
  [ ! -r "$dir/nccl.conf" ] || set_default NCCL_CONF_FILE "$dir/nccl.conf"
  [ ! -r "$dir/ucx.conf" ] || set_default UCX_CONFIG_DIR "$dir"
  report "from $envfile"
  memlock_check
  exec "$@"
fi

# --- 2. the network-status annotation (downward API) + the pod's own sysfs ------------------
[ -e "$statusfile" ] || fail "neither $envfile (rdmanet's pod files, a hostPath mount of" \
  "/run/rdmanet/pods with subPathExpr \$(POD_UID)) nor $statusfile (a downwardAPI volume item" \
  "with fieldRef metadata.annotations['k8s.v1.cni.cncf.io/network-status']) is there"

# parse_status FILE: one line per network of the annotation, in its order:
#   net DEFAULT IFNAME IPS RDMA_DEVICE PCI_ADDRESS   (IPS comma-separated; "-" when absent)
# or "error TEXT" (and exit 2) when the file is not a JSON array of objects or a value we use
# is not what it can be. A JSON parser of its own (any whitespace, any key order, escapes);
# Multus writes the annotation with Go's json.MarshalIndent.
parse_status() {
  awk '
    function bad(m) { print "error " m; failed = 1; exit 2 }
    function tokenize(   n, i, c, j, d, lit) {
      n = length(s); i = 1; T = 0
      while (i <= n) {
        c = substr(s, i, 1)
        if (c == " " || c == "\t" || c == "\n" || c == "\r") { i++; continue }
        if (c == "{" || c == "}" || c == "[" || c == "]" || c == ":" || c == ",") { tok[++T] = c; i++; continue }
        if (c == "\"") {
          for (j = i + 1; j <= n; j++) {
            d = substr(s, j, 1)
            if (d == "\\") j++
            else if (d == "\"") break
          }
          if (j > n) bad("unterminated string")
          tok[++T] = substr(s, i, j - i + 1); i = j + 1; continue
        }
        lit = substr(s, i, 40)
        if (match(lit, /^(true|false|null|-?[0-9][0-9.eE+-]*)/)) { tok[++T] = substr(lit, 1, RLENGTH); i += RLENGTH; continue }
        bad("unexpected character at offset " i)
      }
    }
    # The text of a string token; escapes other than \" \\ \/ become "?" (no value we use
    # can hold one), so a value never spans lines or fields.
    function unq(t,   r, k, c) {
      t = substr(t, 2, length(t) - 2); r = ""
      for (k = 1; k <= length(t); k++) {
        c = substr(t, k, 1)
        if (c == "\\") { k++; c = substr(t, k, 1); if (c != "\"" && c != "\\" && c != "/") c = "?" }
        r = r c
      }
      return r
    }
    function value(path,   t) {
      if (p > T) bad("truncated")
      t = tok[p]
      if (t == "{") { p++; object(path); return }
      if (t == "[") { p++; array(path); return }
      if (substr(t, 1, 1) == "\"") { v[path] = unq(t); p++; return }
      if (t ~ /^(true|false|null|-?[0-9])/) { v[path] = t; p++; return }
      bad("unexpected \"" t "\"")
    }
    function object(path,   k) {
      if (tok[p] == "}") { p++; return }
      for (;;) {
        if (substr(tok[p], 1, 1) != "\"") bad("a key expected")
        k = unq(tok[p]); p++
        if (k ~ /[\/?]/) k = "?"  # keys name paths: none may forge one
        if (tok[p] != ":") bad("\":\" expected after \"" k "\""); p++
        value(path "/" k)
        if (tok[p] == ",") { p++; continue }
        if (tok[p] == "}") { p++; return }
        bad("\",\" or \"}\" expected in " path)
      }
    }
    function array(path,   n) {
      n = 0
      if (tok[p] == "]") { p++; count[path] = 0; return }
      for (;;) {
        value(path "/" n); n++
        if (tok[p] == ",") { p++; continue }
        if (tok[p] == "]") { p++; count[path] = n; return }
        bad("\",\" or \"]\" expected in " path)
      }
    }
    function field(x, pat, max, what, i) {
      if (x == "") return "-"
      if (length(x) > max || x !~ pat) bad("entry " i ": " what " \"" x "\" is not one")
      return x
    }
    { s = s $0 "\n" }
    END {
      if (failed) exit 2
      tokenize(); p = 1
      if (T == 0) exit 0  # empty: the annotation is not there yet
      if (tok[1] != "[") bad("not a JSON array")
      value("")
      if (p <= T) bad("text after the array")
      for (i = 0; i < count[""]; i++) {
        e = "/" i
        ips = ""
        for (k = 0; k < count[e "/ips"]; k++)
          ips = ips (k ? "," : "") field(v[e "/ips/" k], "^[0-9A-Fa-f.:]+$", 45, "IP address", i)
        ifn = field(v[e "/interface"], "^[A-Za-z0-9_.:@-]+$", 15, "interface", i)
        rdev = field(v[e "/device-info/pci/rdma-device"], "^[A-Za-z0-9_.-]+$", 64, "rdma-device", i)
        pci = field(v[e "/device-info/pci/pci-address"], "^[A-Za-z0-9_.:-]+$", 64, "pci-address", i)
        print "net", (v[e "/default"] == "true" ? "default" : "secondary"), ifn, (ips == "" ? "-" : ips), rdev, pci
      }
    }' "$1"
}

# gid_of ADDRESS: the address as sysfs shows GIDs (8 groups of 4 hex digits); IPv4 maps to
# ::ffff:a.b.c.d.
gid_of() {
  echo "$1" | awk '
    /\./ { split($0, o, "."); printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n", o[1], o[2], o[3], o[4]; exit }
    {
      n = split($0, halves, "::"); left = halves[1]; right = (n > 1) ? halves[2] : ""
      nl = (left == "") ? 0 : split(left, l, ":"); nr = (right == "") ? 0 : split(right, r, ":")
      out = ""
      for (i = 1; i <= nl; i++) out = out sprintf("%4s:", l[i])
      for (i = 0; i < 8 - nl - nr; i++) out = out "0000:"
      for (i = 1; i <= nr; i++) out = out sprintf("%4s:", r[i])
      gsub(/ /, "0", out); print tolower(substr(out, 1, length(out) - 1))
    }'
}

# v2_gid DEV ADDRESS: "PORT INDEX" of DEV's RoCE v2 GID for ADDRESS; nothing when none.
v2_gid() {
  want=$(gid_of "$2")
  # shellcheck disable=SC2013 # file names without spaces (sysfs)
  for g in $(grep -slx "$want" "$sys/class/infiniband/$1"/ports/*/gids/* 2>/dev/null); do
    n=${g##*/}
    port=${g%/gids/*}
    [ "$(cat "$port/gid_attrs/types/$n" 2>/dev/null)" = "RoCE v2" ] || continue
    echo "${port##*/} $n"
    return 0
  done
}

# subnet_of IFNAME ADDRESS: the connected subnet of an IPv4 ADDRESS on IFNAME, from the
# pod's /proc/net/route (a.b.c.d/len); nothing when not found.
subnet_of() {
  awk -v dev="$1" -v addr="$2" '
    function hex(h,   k, x) { x = 0; for (k = 1; k <= length(h); k++) x = x * 16 + index("0123456789ABCDEF", toupper(substr(h, k, 1))) - 1; return x }
    BEGIN { split(addr, a, ".") }
    $1 == dev && $3 == "00000000" && length($2) == 8 && length($8) == 8 {
      for (order = 0; order < 2; order++) {  # /proc shows host byte order: try both
        ok = 1; len = 0; net = ""
        for (k = 1; k <= 4; k++) {
          o = order ? k : 5 - k
          d = hex(substr($2, 2 * o - 1, 2)); m = hex(substr($8, 2 * o - 1, 2))
          if (a[k] - a[k] % (256 - m) != d) ok = 0
          for (b = 128; b >= 1 && m >= b; b /= 2) { len++; m -= b }
          net = net (k > 1 ? "." : "") d
        }
        if (ok && len > 0) { print net "/" len; exit }
      }
    }' "$proc/net/route" 2>/dev/null || true
}

# Wait (bounded) until kubelet has put the annotation in the file.
wait=${RDMA_ENV_WAIT:-90}
while :; do
  parsed=$(parse_status "$statusfile") || fail "$statusfile: $(echo "$parsed" | sed -n 's/^error //p')"
  echo "$parsed" | grep -q '^net secondary ' && break
  [ "$wait" -gt 0 ] || fail "$statusfile lists no secondary network: is the pod's" \
    "k8s.v1.cni.cncf.io/networks annotation right, and the downwardAPI item the" \
    "k8s.v1.cni.cncf.io/network-status annotation?"
  wait=$((wait - 1))
  sleep 1
done

# The rails, in the annotation's order or RDMA_IFNAMES's.
rails=$(echo "$parsed" | awk '$2 == "secondary" { print $3, $4, $5, $6 }')
if [ -n "${RDMA_IFNAMES:-}" ]; then
  picked=""
  for want in $RDMA_IFNAMES; do
    line=$(echo "$rails" | awk -v w="$want" '$1 == w')
    [ -n "$line" ] || fail "RDMA_IFNAMES names $want, which $statusfile does not list"
    picked="$picked$line
"
  done
  rails=$picked
fi

i=0 hcas="" sockets="" keys="" own_v4=yes shared_idx="" shared_same=yes any_shared=no range="" one_range=yes roce=0
put() { # KEY VALUE: one line of the result
  keys="$keys$1=$2
"
}
while read -r ifname ips rdev rpci; do
  [ -n "$ifname" ] || continue
  [ -d "$sys/class/net/$ifname" ] || fail "no interface $ifname in the pod, which $statusfile lists"
  a4="" a6=""
  for a in $(echo "$ips" | tr ',' ' '); do
    case $a in
    -) ;;
    *.*) [ -n "$a4" ] || a4=$a ;;
    [fF][eE]8* | [fF][eE][9aAbB]*) ;; # link-local: not a rail's address
    *) [ -n "$a6" ] || a6=$a ;;
    esac
  done
  # The rail's RDMA device, in the order the header gives.
  dev="" how=""
  if [ "$rdev" != - ] && [ -d "$sys/class/infiniband/$rdev" ]; then
    dev=$rdev how="device-info"
  fi
  if [ -z "$dev" ]; then
    for d in "$sys/class/net/$ifname"/device/infiniband/*; do
      [ -e "$d" ] && { dev=${d##*/} how="its PCI device"; break; }
    done
  fi
  if [ -z "$dev" ]; then
    # Soft-RoCE: the device whose parent is the netdev. In shared netns mode every pod's
    # soft-RoCE device is in view, each on a netdev named net1 in its own pod: the one with
    # this rail's address among its GIDs is ours.
    cands=""
    for d in "$sys"/class/infiniband/*; do
      [ "$(cat "$d/parent" 2>/dev/null)" = "$ifname" ] && cands="$cands ${d##*/}"
    done
    for d in $cands; do
      if [ -z "$dev" ] && { { [ -n "$a4" ] && [ -n "$(v2_gid "$d" "$a4")" ]; } ||
        { [ -n "$a6" ] && [ -n "$(v2_gid "$d" "$a6")" ]; }; }; then
        dev=$d how="soft-RoCE on $ifname"
      fi
    done
    # shellcheck disable=SC2086 # words
    [ -n "$dev" ] || [ "$(echo $cands | wc -w)" -ne 1 ] || dev=${cands# } how="soft-RoCE on $ifname"
  fi
  if [ -z "$dev" ]; then
    for d in "$sys"/class/infiniband/*; do
      [ -e "$d" ] || continue
      if { [ -n "$a4" ] && [ -n "$(v2_gid "${d##*/}" "$a4")" ]; } ||
        { [ -n "$a6" ] && [ -n "$(v2_gid "${d##*/}" "$a6")" ]; }; then
        dev=${d##*/} how="the GID of its address"
        break
      fi
    done
  fi
  [ -n "$dev" ] || fail "no RDMA device for $ifname (${a4:-${a6:-no address}}) in $sys/class/infiniband"
  # Its own: a function in the pod (VF, PF, SF: the netdev has a device) or a soft-RoCE device
  # on the pod's netdev. Otherwise a device shared with other pods (macvlan child of an HCA).
  own=no
  if [ -e "$sys/class/net/$ifname/device" ] || [ "$(cat "$sys/class/infiniband/$dev/parent" 2>/dev/null)" = "$ifname" ]; then
    own=yes
  fi
  port=1 idx4="" idx6=""
  layer=$(cat "$sys/class/infiniband/$dev/ports/1/link_layer" 2>/dev/null || true)
  if [ "$layer" != InfiniBand ]; then
    # (set -- would clobber "$@", the command this execs)
    [ -z "$a4" ] || { r=$(v2_gid "$dev" "$a4"); [ -z "$r" ] || port=${r% *} idx4=${r#* }; }
    [ -z "$a6" ] || { r=$(v2_gid "$dev" "$a6"); [ -z "$r" ] || port=${r% *} idx6=${r#* }; }
    [ -n "$idx4$idx6" ] || fail "no RoCE v2 GID for ${a4:-${a6:-the address}} ($ifname) on $dev"
    layer=$(cat "$sys/class/infiniband/$dev/ports/$port/link_layer" 2>/dev/null || echo Ethernet)
  fi
  p=RDMANET_RAIL${i}_
  put "${p}IFNAME" "$ifname"
  [ -z "$a4" ] || put "${p}ADDRESS" "$a4"
  [ -z "$a6" ] || put "${p}ADDRESS_IPV6" "$a6"
  [ "$rpci" = - ] || put "${p}PCI" "$rpci"
  numa=$(cat "$sys/class/net/$ifname/device/numa_node" 2>/dev/null || true)
  [ -z "$numa" ] || put "${p}NUMA_NODE" "$numa"
  put "${p}RDMA_DEVICE" "$dev"
  put "${p}PORT" "$port"
  put "${p}LINK_LAYER" "$layer"
  [ -z "${idx4:-$idx6}" ] || put "${p}GID_INDEX" "${idx4:-$idx6}"
  [ -z "$idx6" ] || put "${p}GID_INDEX_IPV6" "$idx6"
  hcas="${hcas:+$hcas,}$dev:$port"
  sockets="${sockets:+$sockets,}$ifname"
  if [ "$layer" = Ethernet ]; then
    roce=$((roce + 1))
    [ -n "$a4" ] && [ -n "$idx4" ] || own_v4=no
    if [ "$own" = no ]; then
      any_shared=yes
      [ -z "$shared_idx" ] || [ "$shared_idx" = "${idx4:-$idx6}" ] || shared_same=no
      shared_idx=${idx4:-$idx6}
    fi
    net=""
    [ -z "$a4" ] || net=$(subnet_of "$ifname" "$a4")
    if [ -z "$net" ] || { [ -n "$range" ] && [ "$range" != "$net" ]; }; then one_range=no; fi
    range=$net
  fi
  echo "rdma-env: rail $i: $ifname -> $dev:$port ($how; $([ $own = yes ] && echo "its own" || echo "shared with other pods")) GID index ${idx4:-${idx6:-none}}" >&2
  i=$((i + 1))
done <<EOF
$rails
EOF
[ "$i" -gt 0 ] || fail "no rail: $statusfile lists no secondary network${RDMA_IFNAMES:+ of RDMA_IFNAMES}"

put RDMANET_RAILS "$i"
put NCCL_IB_HCA "=$hcas" # "=": exact names (mlx5_1 must not match mlx5_10)
put UCX_NET_DEVICES "$hcas"
put NCCL_SOCKET_IFNAME "=$sockets"
if [ "$roce" -gt 0 ]; then
  if [ "$any_shared" = yes ] && [ "$shared_same" = yes ]; then
    put NCCL_IB_GID_INDEX "$shared_idx"
  else
    if [ "$own_v4" = yes ]; then put NCCL_IB_ADDR_FAMILY AF_INET; else put NCCL_IB_ADDR_FAMILY AF_INET6; fi
    [ "$own_v4" = no ] || [ "$one_range" = no ] || [ -z "$range" ] || put NCCL_IB_ADDR_RANGE "$range"
  fi
fi

# The files NCCL and UCX read (the environment wins over both), written whole and renamed
# so that the ranks of one pod, which all run this at once, never see half a file.
mkdir -p "$out" || fail "cannot create $out (RDMA_ENV_OUT): it must be writable"
tmp=".tmp.$$"
printf '# rdma-env.sh: from %s\n%s' "$statusfile" "$keys" >"$out/rdma.env$tmp"
printf '%s' "$keys" | grep '^NCCL_' >"$out/nccl.conf$tmp" || true
printf '%s' "$keys" | grep '^UCX_' >"$out/ucx.conf$tmp" || true
for f in rdma.env nccl.conf ucx.conf; do mv -f "$out/$f$tmp" "$out/$f"; done

while IFS='=' read -r key value; do
  [ -z "$key" ] || set_default "$key" "$value"
done <<EOF
$keys
EOF
set_default NCCL_CONF_FILE "$out/nccl.conf"
set_default UCX_CONFIG_DIR "$out"
report "from $statusfile"
memlock_check
exec "$@"
