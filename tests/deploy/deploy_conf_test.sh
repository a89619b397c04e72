#!/bin/sh
# Every example in conf/ passes the real binaries' validate mode, so examples
# cannot rot: `rdmanet validate` for all of them, `rdmanet-ipam validate` for
# those with an rdmanet-ipam section. A binary without a validate mode fails.
# Usage: deploy_conf_test.sh plugin|ipam BINARY CONF_DIR
set -eu
what=$1 bin=$2 dir=$3
set --
for f in "$dir"/*.conf "$dir"/*.conflist; do
  [ -e "$f" ] || continue
  if [ "$what" = ipam ]; then
    grep -q '"type": *"rdmanet-ipam"' "$f" || continue
  fi
  set -- "$@" "$f"
done
[ $# -gt 0 ] || { echo "FAIL: no examples in $dir" >&2; exit 1; }
out=$("$bin" validate "$@" 2>&1) && rc=0 || rc=$?
echo "$out"
if echo "$out" | grep -q "CNI_COMMAND is missing"; then
  echo "FAIL: $bin has no validate mode" >&2
  exit 1
fi
[ "$(echo "$out" | grep -c ': ok$')" -eq $# ] || { echo "FAIL: not every file reported ok" >&2; exit 1; }
exit "$rc"
