#!/bin/sh
# The lint's control: tidy.sh (beside this script, with the repo's .clang-tidy) must reject
# tidy_control.h and tidy_control.cc placed in each folder tidy.sh lints. A header filter
# that stops matching the layers' headers (until issue #44 it matched none, and every
# header passed unlinted) fails here.
#
#   tidy_control_test.sh [SCRATCH_PARENT]     (ctest passes the build dir's tests/)
#
# The scratch tree has a clone's shape: .clang-tidy at its top, <layer>/tidy_control.{h,cc}
# with the source including "<layer>/tidy_control.h" as the layers write includes, and a
# compile_commands.json with -I at the top, so the compiler names the header by absolute
# path as in a build. The filter itself is also checked: it matches a header of each layer
# of this clone by its absolute path, and no header under /usr.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(git -C "$here" rev-parse --show-toplevel)
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

layers=$(sed -n "s/^layers='\(.*\)'\$/\1/p" "$here/tidy.sh")
[ -n "$layers" ] || fail "no layers='...' line in $here/tidy.sh"
re=$(sed -n "s/^HeaderFilterRegex: '\(.*\)'\$/\1/p" "$root/.clang-tidy")
[ -n "$re" ] || fail "no single-quoted HeaderFilterRegex in $root/.clang-tidy"

for layer in $layers; do
  h=$(git -C "$root" ls-files -- "$layer/*.h" | head -1)
  [ -n "$h" ] || continue  # a layer not made yet
  echo "$root/$h" | grep -Eq "$re" || fail "HeaderFilterRegex does not match $root/$h"
done
for h in /usr/include/rdma/rdma_netlink.h /usr/include/absl/base/config.h \
  /usr/include/libnl3/netlink/route/link.h /usr/local/include/cni/types.h; do
  echo "$h" | grep -Eq "$re" && fail "HeaderFilterRegex matches the system header $h"
done

scratch=$(mktemp -d "${1:-${TMPDIR:-/tmp}}/tidy-control.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
cp "$root/.clang-tidy" "$scratch/"
entries=""
set --
for layer in $layers; do
  mkdir "$scratch/$layer"
  cp "$here/tidy_control.h" "$scratch/$layer/"
  sed "s|#include \"tidy_control.h\"|#include \"$layer/tidy_control.h\"|" "$here/tidy_control.cc" \
    >"$scratch/$layer/tidy_control.cc"
  grep -q "#include \"$layer/tidy_control.h\"" "$scratch/$layer/tidy_control.cc" ||
    fail "tidy_control.cc does not include \"tidy_control.h\""
  src=$scratch/$layer/tidy_control.cc
  entries="$entries{\"directory\": \"$scratch\", \"file\": \"$src\","
  entries="$entries \"command\": \"c++ -std=c++20 -I$scratch -c $src\"},"
  set -- "$@" "$src"
done
echo "[${entries%,}]" >"$scratch/compile_commands.json"

out=$("$here/tidy.sh" "$scratch" "$@" 2>&1) && rc=0 || rc=$?
echo "$out"
[ "$rc" -ne 0 ] || fail "tidy.sh passed the control"
for layer in $layers; do
  for file in tidy_control.h tidy_control.cc; do
    echo "$out" | grep -Eq "^$scratch/$layer/$file:[0-9]+:[0-9]+: (warning|error): " ||
      fail "clang-tidy found nothing in $layer/$file"
  done
done
echo "tidy control: rejected in $(echo "$layers" | wc -w) folders ($layers), header and source"
