#!/bin/sh
# arm64, for Grace-based GPU nodes (GH200, GB200): both node binaries and the unit tests
# cross-built with Debian's cross compiler and arm64 -dev packages (tests/tools/cross.sh), the
# binaries checked as the amd64 ones are (glibc only, at most 2.34, exceptions unwind), and
# the unit and CNI protocol tests run under qemu-user.
#
# What runs: base_test, cni_test (protocol: environment, config, versions, results,
# errors, delegation to Debian's host-local), rdma_test (GID tables and RDMA-CM configfs on
# fake trees), ipam_test (allocator, store, cluster mode against the fake and the CNI
# protocol of the arm64 rdmanet-ipam binary, exec'd through binfmt_misc), plugin_unit_test, agent_test,
# and the CNI protocol of the arm64 rdmanet binary (VERSION, refusals with their codes).
# What does not: the suites that create network namespaces and links (netns_test,
# plugin_test, and the few netns cases of the binaries above, excluded by name below):
# those are about the kernel, which is the machine's own under qemu-user, and qemu-user
# does not pass the namespace ioctls (NS_GET_NSTYPE) through.
#
# A binfmt_misc entry for aarch64 is registered for the run, from a mount namespace of the
# test's own, and removed at the end. Its interpreter is a wrapper
# that gives qemu-user the cross toolchain's C library (-L), since the tests exec their
# binaries with environments of their own.
# Usage: cross_test.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1 dir=$2
cd "$src"
[ "$(id -u)" -eq 0 ] || { echo "FAIL: needs root (apt, binfmt_misc)"; exit 1; }
tests/tools/cross.sh deps arm64
t0=$(date +%s)
tests/tools/cross.sh configure arm64 "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON \
  -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 -DRDMANET_TESTS=ON >/dev/null
ninja -C "$dir" rdmanet rdmanet-ipam base_test cni_test rdma_test ipam_test plugin_unit_test agent_test \
  >"$dir/ninja.log" 2>&1 || { tail -50 "$dir/ninja.log"; echo "FAIL: arm64 build"; exit 1; }
echo "arm64 build: $(($(date +%s) - t0)) s"

fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }

for b in "$dir/agent/rdmanet" "$dir/ipam/rdmanet-ipam"; do
  machine=$(readelf -h "$b" | sed -n 's/^ *Machine: *//p')
  [ "$machine" = AArch64 ] && ok "$(basename "$b") is an AArch64 executable" || bad "$(basename "$b"): $machine"
done
if tests/binary/elf_deps.sh "$dir/agent/rdmanet" "$dir/ipam/rdmanet-ipam"; then
  ok "the arm64 binaries need only glibc 2.34 and unwind exceptions"
else
  bad "the arm64 binaries' ELF check"
fi

# The CNI protocol of the arm64 rdmanet (no netns needed: refusals come before any change).
cni() { # CNI_COMMAND STDIN -> stdout; status in $rc
  rc=0
  out=$(printf '%s' "$2" | env -i CNI_COMMAND="$1" CNI_CONTAINERID=c1 CNI_IFNAME=net1 \
    CNI_NETNS=/proc/self/ns/net CNI_PATH=/nonexistent \
    tests/tools/cross.sh run arm64 "$dir/agent/rdmanet" 2>/dev/null) || rc=$?
}
cni VERSION '{"cniVersion":"1.0.0"}'
[ $rc -eq 0 ] && echo "$out" | grep -q '"supportedVersions":\["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"\]' &&
  ok "rdmanet VERSION" || bad "rdmanet VERSION: $rc $out"
cni ADD '{"cniVersion":"1.0.0",'
[ $rc -ne 0 ] && echo "$out" | grep -q '"code":6' && ok "malformed JSON: code 6" || bad "malformed JSON: $rc $out"
cni ADD '{"cniVersion":"9.9.9","name":"n","type":"rdmanet","device":"x"}'
[ $rc -ne 0 ] && echo "$out" | grep -q '"code":1' && ok "unknown version: code 1" || bad "unknown version: $rc $out"
cni ADD '{"cniVersion":"1.0.0","name":"n","type":"rdmanet","mtu":"9000","device":"x"}'
[ $rc -ne 0 ] && echo "$out" | grep -q '"code":7' && echo "$out" | grep -q mtu &&
  ok "a wrong type: code 7 naming the field" || bad "wrong type: $rc $out"
v=$(tests/tools/cross.sh run arm64 "$dir/agent/rdmanet" version)
[ "$v" = "rdmanet $(sed -n 's/^project(rdmanet VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)" ] &&
  ok "rdmanet version: $v" || bad "rdmanet version: $v"

# The unit tests, with aarch64 executables exec'd through binfmt_misc where they exec one.
wrapper="$dir/qemu-aarch64-wrapper"
printf '#!/bin/sh\nexec %s -L /usr/aarch64-linux-gnu "$@"\n' "$(command -v qemu-aarch64-static)" >"$wrapper"
chmod 755 "$wrapper"
# Suites that create network namespaces or take nsfs handles (see above).
netns_suites="ResolveDevice.*:GidWaitTest.*:GidRefreshTest.*:Attachment.*:*Netns*"
# Each must run as many tests as the same binary of the native build (beside the arm64 one)
# lists with the same filter: a run of none, or of fewer, is no pass.
native=$(dirname "$dir")
unshare -m sh -eu -c '
  dir=$1 netns_suites=$2 wrapper=$3 native=$4
  mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  entry=/proc/sys/fs/binfmt_misc/rdmanet-test-aarch64
  # A newer entry wins over an older one for the same magic (the machine'"'"'s own, if any).
  [ ! -e $entry ] || echo -1 >$entry
  # qemu-user-static'"'"'s magic and mask, our wrapper, "F": the wrapper is opened now.
  sed -n "s|^:qemu-aarch64:\(M::[^:]*:[^:]*\):.*|:rdmanet-test-aarch64:\1:$wrapper:F|p" \
    /usr/lib/binfmt.d/qemu-aarch64.conf >/proc/sys/fs/binfmt_misc/register
  trap "echo -1 >$entry" EXIT
  status=0
  for t in base/base_test cni/cni_test rdma/rdma_test ipam/ipam_test plugin/plugin_unit_test agent/agent_test; do
    log=$dir/$(basename $t).log
    want=$("$native/$t" --gtest_filter="-$netns_suites" --gtest_list_tests | grep -c "^  ") || want=0
    if "$dir/$t" --gtest_brief=1 --gtest_filter="-$netns_suites" >"$log" 2>&1; then
      ran=$(sed -n "s/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran.*/\1/p" "$log" | head -n 1)
      if [ "${ran:-0}" -gt 0 ] && [ "$ran" -eq "$want" ] && ! grep -q "^\[  SKIPPED \]" "$log"; then
        echo "ok   $t under qemu-user: $(grep -o "[0-9]* tests\? from [0-9]* test suites\? ran" "$log" | head -1)"
      else
        echo "FAIL $t under qemu-user: ${ran:-no} tests ran, $want in $native/$t"; tail -5 "$log"; status=1
      fi
    else
      echo "FAIL $t under qemu-user:"; tail -30 "$log"; status=1
    fi
  done
  exit $status
 ' sh "$dir" "$netns_suites" "$wrapper" "$native" || fails=$((fails + 1))

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
