#!/bin/sh
# clang-tidy, with the repo's .clang-tidy (warnings are errors), over the C++ sources of
# the layers or the files given, one process per core, using BUILD_DIR's
# compile_commands.json. Prints each file's findings; non-zero if any file has one.
# Usage: tests/tidy.sh BUILD_DIR [FILE...]
set -eu
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [FILE...]" >&2; exit 2; }
build=$(cd "$1" && pwd)
shift
cd "$(dirname "$0")/.."
[ -f "$build/compile_commands.json" ] || { echo "tidy: no $build/compile_commands.json" >&2; exit 1; }
command -v clang-tidy >/dev/null || { echo "tidy: clang-tidy missing (tests/deps.sh installs it)" >&2; exit 1; }
if [ $# -eq 0 ]; then
  set -- $(git ls-files -co --exclude-standard -- 'base/*.cc' 'netns/*.cc' 'rdma/*.cc' \
    'cni/*.cc' 'plugin/*.cc' 'ipam/*.cc' | grep -v '^build' | sort)
fi
[ $# -gt 0 ] || { echo "tidy: no sources found" >&2; exit 1; }
log=$(mktemp -d /tmp/rdmanet-tidy.XXXXXX)
trap 'rm -rf "$log"' EXIT
start=$(date +%s)
# One file per clang-tidy run: its findings go to their own log, and xargs reports a
# failure (exit 123) if any run finds something.
status=0
printf '%s\n' "$@" | xargs -P "$(nproc)" -I{} sh -c \
  'out="$2/$(echo "$1" | tr / _).log"; clang-tidy -p "$0" --quiet "$1" >"$out" 2>&1 || { echo "tidy: $1"; cat "$out"; exit 1; }' \
  "$build" {} "$log" || status=1
echo "clang-tidy: $# files in $(($(date +%s) - start)) s, $([ $status -eq 0 ] && echo clean || echo 'findings above')"
exit $status
