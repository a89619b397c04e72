#!/usr/bin/env bash
# Two builds of rdmanet side by side (not a test: timing is noisy, read the ratio): what a
# change costs one ADD and one DEL. In one run, CYCLES ADD+DEL cycles of build A and of build B,
# interleaved (the order alternates every round), each moving its own veth end into its own
# pod netns (netdev mode, rdmanet-ipam in process), the far ends up as a cabled NIC's are.
# Prints median and p99 per build and call, and B/A.
#
#   tests/bench/ab_bench.sh A_RDMANET A_IPAM B_RDMANET B_IPAM [EXTRA_JSON_MEMBERS]
#   CYCLES=200 BENCH_DIR=/var/tmp (defaults)
#
# Links and netns are named abb<pid-hex>..., created here and deleted on every exit path;
# addresses come from 198.18.0.0/15 (RFC 2544) and exist only in the pods.
set -euo pipefail
export LC_ALL=C
CYCLES="${CYCLES:-200}"
die() { echo "ab_bench: $*" >&2; exit 1; }
[[ $# -ge 4 ]] || die "usage: ab_bench.sh A_RDMANET A_IPAM B_RDMANET B_IPAM [EXTRA_JSON_MEMBERS]"
[[ "$(id -u)" -eq 0 ]] || die "run as root (it creates netns and veth pairs)"
extra="${5:+,$5}"

tag="abb$(printf '%x' $$)"
work="$(mktemp -d "${BENCH_DIR:-/var/tmp}/ab_bench.XXXXXX")"
cleanup() {
  set +e
  for x in A B; do
    ip link del "${tag}${x}p" 2>/dev/null
    ip netns del "${tag}-$x" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# Copies, so a rebuild during the run cannot change what is measured.
for x in A B; do
  mkdir -p "$work/$x/bin"
  if [[ $x == A ]]; then cp "$1" "$work/A/bin/rdmanet" && cp "$2" "$work/A/bin/rdmanet-ipam"
  else cp "$3" "$work/B/bin/rdmanet" && cp "$4" "$work/B/bin/rdmanet-ipam"; fi
  ip link add "${tag}$x" type veth peer name "${tag}${x}p"
  ip link set "${tag}${x}p" up
  ip netns add "${tag}-$x"
  printf '{"cniVersion":"1.0.0","name":"ab","type":"rdmanet","device":"%s","stateDir":"%s"%s,' \
    "${tag}$x" "$work/$x/state" "$extra" >"$work/$x/conf"
  printf '"ipam":{"type":"rdmanet-ipam","dataDir":"%s","ranges":[[{"subnet":"198.18.%d.0/24"}]]}}' \
    "$work/$x/ipam" "$([[ $x == A ]] && echo 0 || echo 1)" >>"$work/$x/conf"
done

# call BUILD COMMAND ID: one call as a runtime makes it; the elapsed microseconds appended to
# $work/BUILD.COMMAND (unless ID starts with w: warm-up).
call() {
  local t0=${EPOCHREALTIME/./}
  CNI_COMMAND="$2" CNI_CONTAINERID="c$3" CNI_NETNS="/run/netns/${tag}-$1" CNI_IFNAME=eth0 \
    CNI_PATH="$work/$1/bin" "$work/$1/bin/rdmanet" <"$work/$1/conf" >"$work/out" 2>>"$work/stderr" ||
    die "build $1 $2 $3: $(cat "$work/out")"
  local us=$((${EPOCHREALTIME/./} - t0))
  [[ $3 == w* ]] || echo "$us" >>"$work/$1.$2"
}
cycle() { call "$1" ADD "$2" && call "$1" DEL "$2"; }
for i in 1 2 3; do cycle A "w$i"; cycle B "w$i"; done
for ((i = 0; i < CYCLES; i++)); do
  if ((i % 2)); then cycle A "$i"; cycle B "$i"; else cycle B "$i"; cycle A "$i"; fi
done

stats() { # FILE: "median p99" in ms
  sort -n "$1" | awk '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    r = int(0.99 * (NR - 1) + 0.5) + 1
    printf "%.2f %.2f\n", m / 1000, v[r] / 1000 }'
}
echo "## A/B: $CYCLES ADD+DEL cycles each, interleaved, $(nproc) CPUs, $(uname -r)"
echo "A: $1"
echo "B: $3"
printf '| call | A median | A p99 | B median | B p99 | B/A median |\n|---|---|---|---|---|---|\n'
for c in ADD DEL; do
  read -r am ap < <(stats "$work/A.$c")
  read -r bm bp < <(stats "$work/B.$c")
  printf '| %s | %s ms | %s ms | %s ms | %s ms | %.2fx |\n' "$c" "$am" "$ap" "$bm" "$bp" \
    "$(awk -v a="$am" -v b="$bm" 'BEGIN { print b / a }')"
done
