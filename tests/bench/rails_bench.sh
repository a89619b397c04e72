#!/usr/bin/env bash
# Eight-rail attach benchmark (issue #17 item 6). Not a test: timing is noisy, read the
# ratios. In one run on one machine, a pod gets eight rails (veth ends standing in for the
# eight NICs of an 8-GPU node) the way Multus attaches them, eight ADDs one after another,
# and loses them again (eight DELs), by
#   (a) rdmanet + rdmanet-ipam, one network per rail (each on its own subnet), with what a
#       Kubernetes pod gets by default: per-rail source routing and the pod's rails files
#       (CNI_ARGS carry K8S_POD_UID);
#   (b) Debian's reference host-device + host-local, the same eight calls;
#   (c) the kernel floor: the same moves, renames, link-ups and addresses from two
#       long-lived `ip -batch` processes (host and pod netns), no process start, no IPAM,
#       nothing on disk.
# Times are per pod (eight calls), median and p99 over CYCLES rounds, the three contenders
# interleaved with a rotating order.
#
#   tests/bench/rails_bench.sh [path/to/rdmanet] [path/to/rdmanet-ipam]
#   CYCLES=20 RAILS=8 BENCH_DIR=/var/tmp DISK_LOAD=0 (defaults; DISK_LOAD=1: disk_load.sh)
set -euo pipefail
export LC_ALL=C

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=disk_load.sh
. "$here/disk_load.sh"
CYCLES="${CYCLES:-20}"
RAILS="${RAILS:-8}"
REF_DIR="${REF_DIR:-/usr/lib/cni}"
src_ours="${1:-$here/../../build/agent/rdmanet}"
src_ipam="${2:-$here/../../build/ipam/rdmanet-ipam}"

die() {
  echo "rails_bench: $*" >&2
  exit 1
}
[[ "$(id -u)" -eq 0 ]] || die "run as root (it creates netns and veth pairs)"
((CYCLES >= 1 && RAILS >= 1 && RAILS <= 16)) || die "bad CYCLES/RAILS"
[[ -x "$REF_DIR/host-device" && -x "$REF_DIR/host-local" ]] ||
  die "no $REF_DIR/host-device: apt-get install containernetworking-plugins"
for b in "$src_ours" "$src_ipam"; do [[ -x "$b" ]] || die "not executable: $b"; done

tag="rb$(printf '%x' $$)" # link names: <tag><contender><rail>, within IFNAMSIZ
work="$(mktemp -d "${BENCH_DIR:-/var/tmp}/rails_bench.XXXXXX")"
peers=() netns=() ip_pids=()
cleanup() {
  set +e
  stop_disk_load
  [[ -n "${host_w:-}" ]] && exec {host_w}>&-
  [[ -n "${pod_w:-}" ]] && exec {pod_w}>&-
  for p in "${ip_pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  for l in "${peers[@]}"; do [[ -e "/sys/class/net/$l" ]] && ip link del "$l" 2>/dev/null; done
  for n in "${netns[@]}"; do ip netns del "$n" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

mkdir -p "$work/bin"
cp "$src_ours" "$work/bin/rdmanet"
cp "$src_ipam" "$work/bin/rdmanet-ipam"

for x in a b c; do
  ip netns add "${tag}-$x"
  netns+=("${tag}-$x")
  for ((k = 0; k < RAILS; k++)); do
    ip link add "${tag}$x$k" type veth peer name "${tag}$x${k}p"
    ip link set "${tag}$x${k}p" up # far end up: carrier at once
    peers+=("${tag}$x${k}p")
  done
done

# Rail k's configs: network rail<k> on 198.18.<k>.0/24 (a) and 198.19.<k>.0/24 (b).
for ((k = 0; k < RAILS; k++)); do
  printf '{"cniVersion":"1.0.0","name":"rail%d","type":"rdmanet","device":"%s","stateDir":"%s","podInfoDir":"%s","ipam":{"type":"rdmanet-ipam","dataDir":"%s","ranges":[[{"subnet":"198.18.%d.0/24"}]]}}' \
    "$k" "${tag}a$k" "$work/state" "$work/pods" "$work/ipam-ours" "$k" >"$work/a$k.json"
  printf '{"cniVersion":"1.0.0","name":"rail%d","type":"host-device","device":"%s","ipam":{"type":"host-local","dataDir":"%s","ranges":[[{"subnet":"198.19.%d.0/24"}]]}}' \
    "$k" "${tag}b$k" "$work/ipam-ref" "$k" >"$work/b$k.json"
done

# plugin_pod CONTENDER PLUGIN CNI_PATH COMMAND CID: the pod's eight calls, one after another.
plugin_pod() {
  local k
  for ((k = 0; k < RAILS; k++)); do
    CNI_COMMAND="$4" CNI_CONTAINERID="$5" CNI_NETNS="/run/netns/${tag}-$1" CNI_IFNAME="net$((k + 1))" \
      CNI_PATH="$3" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=$5;K8S_POD_UID=uid-$5" \
      "$2" <"$work/$1$k.json" >"$work/out" 2>>"$work/stderr.log" ||
      die "$2 $4 rail $k: $(cat "$work/out")"
  done
}

# (c) the floor: `ip -batch` in the host (moves) and in the pod (up, address), each step
# ended by a marker line ("zz": no ip object, answered on stderr without a request).
mkfifo "$work/host.in" "$work/host.err" "$work/pod.in" "$work/pod.err"
ip -force -batch - <"$work/host.in" >/dev/null 2>"$work/host.err" &
ip_pids+=("$!")
exec {host_w}>"$work/host.in" {host_r}<"$work/host.err"
ip -n "${tag}-c" -force -batch - <"$work/pod.in" >/dev/null 2>"$work/pod.err" &
ip_pids+=("$!")
exec {pod_w}>"$work/pod.in" {pod_r}<"$work/pod.err"
batch() {
  local w=$1 r=$2 line
  shift 2
  printf '%s\n' "$@" zz >&"$w"
  while IFS= read -r -u "$r" line; do
    case "$line" in
      'Object "zz" is unknown'*) IFS= read -r -u "$r" line && return 0 ;;
      *) die "ip -batch: $line" ;;
    esac
  done
  die "ip -batch exited"
}
# Per rail, as a runtime would have it: the move, then the pod's side of that rail.
floor_add() {
  local k
  for ((k = 0; k < RAILS; k++)); do
    batch "$host_w" "$host_r" "link set dev ${tag}c$k netns ${tag}-c name net$((k + 1))"
    batch "$pod_w" "$pod_r" "link set dev net$((k + 1)) up" "address add 198.20.$k.2/24 dev net$((k + 1))"
  done
}
floor_del() {
  local k
  for ((k = 0; k < RAILS; k++)); do
    batch "$pod_w" "$pod_r" "link set dev net$((k + 1)) netns $$ name ${tag}c$k"
  done
}

now() { echo "${EPOCHREALTIME/./}"; }
# round CONTENDER ID: one attach and one detach of the pod, times appended; checked after.
round() {
  local t0
  t0=$(now)
  case $1 in
    a) plugin_pod a "$work/bin/rdmanet" "$work/bin" ADD "$2" ;;
    b) plugin_pod b "$REF_DIR/host-device" "$REF_DIR" ADD "$2" ;;
    c) floor_add ;;
  esac
  echo $(($(now) - t0)) >>"$work/$1.add"
  [[ ! -e "/sys/class/net/${tag}${1}$((RAILS - 1))" ]] || die "$1: the last rail is still in the host"
  [[ "$1" != a ]] || [[ "$(grep -c '^RDMANET_RAIL[0-9]*_IFNAME=' "$work/pods/uid-$2/rdma.env")" -eq "$RAILS" ]] ||
    die "a: the pod's rails file does not list $RAILS rails"
  t0=$(now)
  case $1 in
    a) plugin_pod a "$work/bin/rdmanet" "$work/bin" DEL "$2" ;;
    b) plugin_pod b "$REF_DIR/host-device" "$REF_DIR" DEL "$2" ;;
    c) floor_del ;;
  esac
  echo $(($(now) - t0)) >>"$work/$1.del"
  [[ -e "/sys/class/net/${tag}${1}0" ]] || die "$1: rail 0 did not come back"
}

stats() {
  sort -n "$1" | awk '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    r = int(0.99 * (NR - 1) + 0.5) + 1
    printf "%.1f %.1f\n", m / 1000, v[r] / 1000 }'
}

echo "rails_bench: $RAILS rails, $CYCLES rounds each, interleaved, $(disk_load_label)" >&2
start_disk_load "$work"
for i in 1 2; do round a "w$i"; round b "w$i"; round c "w$i"; done # warm-up
rm -f "$work"/[abc].add "$work"/[abc].del
for ((i = 0; i < CYCLES; i++)); do
  case $((i % 3)) in
    0) round a "r$i"; round b "r$i"; round c "r$i" ;;
    1) round b "r$i"; round c "r$i"; round a "r$i" ;;
    2) round c "r$i"; round a "r$i"; round b "r$i" ;;
  esac
done

stop_disk_load
read -r a_add a_add99 < <(stats "$work/a.add")
read -r b_add b_add99 < <(stats "$work/b.add")
read -r c_add c_add99 < <(stats "$work/c.add")
read -r a_del a_del99 < <(stats "$work/a.del")
read -r b_del b_del99 < <(stats "$work/b.del")
read -r c_del c_del99 < <(stats "$work/c.del")
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { printf "%.2f", x / y }'; }
cat <<OUT
$RAILS rails per pod, $CYCLES rounds, $(disk_load_label), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg), kernel $(uname -r)
                                   attach (ms)        detach (ms)
                                   median    p99      median    p99
(a) rdmanet + rdmanet-ipam         $(printf '%7s %7s   %7s %7s' "$a_add" "$a_add99" "$a_del" "$a_del99")
(b) host-device + host-local       $(printf '%7s %7s   %7s %7s' "$b_add" "$b_add99" "$b_del" "$b_del99")
(c) ip -batch floor                $(printf '%7s %7s   %7s %7s' "$c_add" "$c_add99" "$c_del" "$c_del99")
attach: a/c $(ratio "$a_add" "$c_add") (target <= 1.15), a/b $(ratio "$a_add" "$b_add")
detach: a/c $(ratio "$a_del" "$c_del"), a/b $(ratio "$a_del" "$b_del")
OUT
