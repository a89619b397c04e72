#!/bin/sh
# The demo: builds rdmanet and rdmanet-ipam, boots Debian's 7.3 kernel under
# QEMU (the kernel lab, tests/lab: a real RDMA subsystem with soft-RoCE; this
# machine's own kernel has none) and there, through the real CNI protocol,
# gives two pods (network namespaces) an interface each on the two ends of one
# veth pair ("two NIC ports on one wire"), with a soft-RoCE device created in
# each pod. It shows the CNI results, each pod's RDMA device and GID table,
# the RoCE v2 GID index rdmanet reports, RDMA traffic between the pods
# (ibv_rc_pingpong, rping), the RDMA-CM ToS on the wire, and DEL cleaning up.
# The same run is the lab test lab_shared_pingpong.
set -eu
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "tests/demo.sh: run as root" >&2; exit 1; }

tests/tools/deps.sh all
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build rdmanet rdmanet-ipam

log=$(mktemp /tmp/rdmanet-demo.XXXXXX)
trap 'rm -f "$log"' EXIT
echo "== booting the kernel lab (first run downloads ~200 MB of Debian packages)"
rc=0
tests/lab/run.sh --timeout 240 \
  --add build/agent/rdmanet:/opt/cni/bin/rdmanet \
  --add build/ipam/rdmanet-ipam:/opt/cni/bin/rdmanet-ipam \
  shared-pingpong > "$log" 2>&1 || rc=$?
# The pods' story, then the verdict of every check.
sed -n 's/^guest| DEMO| \{0,1\}//p' "$log"
sed -n '/^==== lab summary/,$p' "$log"
if [ "$rc" -ne 0 ]; then
  echo "demo FAILED; the whole guest console follows" >&2
  cat "$log" >&2
  exit "$rc"
fi
echo
echo "demo finished: 2 pods attached with RDMA devices, RDMA traffic between them, detached"
