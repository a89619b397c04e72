#!/bin/sh
# clang-tidy, with the repo's .clang-tidy (warnings are errors), one process per core,
# using BUILD_DIR's compile_commands.json. Prints each file's findings; non-zero if any
# file has one.
#
#   tests/lint/tidy.sh BUILD_DIR               every C++ source of the layers (~11 min on 2 cores)
#   tests/lint/tidy.sh BUILD_DIR --changed     only what changed since the last full clean run
#   tests/lint/tidy.sh BUILD_DIR --record      what --changed checks, and on success writes
#                                              .ci/tidy-clean (a full run when there is none)
#   tests/lint/tidy.sh BUILD_DIR FILE...       those files
#
# .ci/tidy-clean lists the git blob id of every source and header a full run found clean,
# with the clang-tidy version and .clang-tidy's id. --changed (what CI runs, on a clean
# clone) checks the .cc files whose id differs or that are new, and those that include a
# header whose id differs, directly or through other headers; everything when the config,
# the tool or the list changed or is missing. A full run takes about as long as the rest of
# the test command, so CI checks what a change touches and developers record a full run
# when they land.
#
# Headers are linted through the sources that include them (.clang-tidy's
# HeaderFilterRegex; tidy_control_test.sh beside this script fails if a bad header gets
# through). Tests (*_test.cc, testing/, tests/fuzz) are exempt from the function-size limit:
# their files are run with --checks=-readability-function-size.
set -eu
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [--changed|--record|FILE...]" >&2; exit 2; }
build=$(cd "$1" && pwd)
shift
cd "$(dirname "$0")/../.."
[ -f "$build/compile_commands.json" ] || { echo "tidy: no $build/compile_commands.json" >&2; exit 1; }
command -v clang-tidy >/dev/null || { echo "tidy: clang-tidy missing (tests/tools/deps.sh installs it)" >&2; exit 1; }
# A unity build (tests/run.sh makes one; its -D without a type is cached UNINITIALIZED)
# compiles batches of files, so its compile database has no entry per file: configure
# (not build) the same tree without batching next to it and use that database.
db=$build
if grep -Eq '^CMAKE_UNITY_BUILD:[A-Z]+=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  db=$build/tidy-db
  cmake -S . -B "$db" -G Ninja -DCMAKE_UNITY_BUILD=OFF >/dev/null
fi

list=.ci/tidy-clean
layers='base netns rdma cni plugin ipam agent'
all_sources() {
  for d in $layers; do git ls-files -co --exclude-standard -- "$d/*.cc"; done | sort -u
}
all_files() {
  for d in $layers; do git ls-files -co --exclude-standard -- "$d/*.cc" "$d/*.h"; done | sort -u
}
# The files of the layers ending in .$1 that include one of the headers "$2"...
# (includes name headers from the top: "base/error.h").
included_by() {
  ext=$1
  shift
  dirs=$(for d in $layers; do [ -d "$d" ] && echo "$d"; done)
  for h in "$@"; do
    # shellcheck disable=SC2086
    grep -rlF "#include \"$h\"" $dirs --include="*.$ext" || true
  done
}
# The .cc files of the layers that include one of the headers "$@", directly or through
# other headers.
includers() {
  headers=$(printf '%s\n' "$@" | sort -u)
  while :; do
    # shellcheck disable=SC2046,SC2086
    grown=$(printf '%s\n' $headers $(included_by h $headers) | sort -u)
    [ "$grown" = "$headers" ] && break
    headers=$grown
  done
  # shellcheck disable=SC2086
  included_by cc $headers | sort -u
}
# "<blob id> <path>" of every file the list covers, plus the config and the tool.
fingerprint() {
  echo "$(clang-tidy --version | sed -n 's/.*version \([0-9.]*\).*/\1/p' | head -1) clang-tidy"
  echo "$(git hash-object .clang-tidy) .clang-tidy"
  for f in $(all_files); do echo "$(git hash-object "$f") $f"; done
}

mode=files
case "${1:-}" in
  --changed) mode=changed; shift ;;
  --record) mode=record; shift ;;
esac
if [ "$mode" != files ] || [ $# -eq 0 ]; then
  set -- $(all_sources)
fi
if [ "$mode" != files ] && [ -f "$list" ]; then
  now=$(mktemp)
  fingerprint >"$now"
  if [ "$(head -2 "$now")" = "$(head -2 "$list")" ]; then
    changed=$(grep -vxF -f "$list" "$now" | awk '{print $2}')
    sources=$(echo "$changed" | grep '\.cc$' || true)
    headers=$(echo "$changed" | grep '\.h$' || true)
    # shellcheck disable=SC2046,SC2086
    set -- $(printf '%s\n' $sources $([ -z "$headers" ] || includers $headers) | sort -u)
    echo "tidy: $# files changed since the last full clean run ($list)"
  else
    echo "tidy: clang-tidy or .clang-tidy changed since $list was recorded: every file"
  fi
  rm -f "$now"
elif [ "$mode" != files ]; then
  echo "tidy: no $list: every file"
fi
if [ $# -eq 0 ]; then
  echo "clang-tidy: nothing to check"
  [ "$mode" = record ] && fingerprint >"$list" && echo "tidy: recorded $list"
  exit 0
fi

log=$(mktemp -d /tmp/rdmanet-tidy.XXXXXX)
trap 'rm -rf "$log"' EXIT
# What is recorded is what is checked: the ids of the files as they are now, so a file
# edited during the run shows as changed next time instead of passing unchecked.
[ "$mode" = record ] && fingerprint >"$log/fingerprint"
start=$(date +%s)
status=0
printf '%s\n' "$@" | xargs -P "$(nproc)" -I{} sh -c '
  out="$2/$(echo "$1" | tr / _).log"
  case $1 in
    *_test.cc | */testing/* | testing/* | */tests/fuzz/* | tests/fuzz/*)
      exempt=--checks=-readability-function-size ;;
    *) exempt= ;;
  esac
  clang-tidy -p "$0" --quiet $exempt "$1" >"$out" 2>&1 ||
    { echo "tidy: $1"; grep -v "warnings generated" "$out"; exit 1; }' \
  "$db" {} "$log" || status=1
echo "clang-tidy: $# files in $(($(date +%s) - start)) s, $([ $status -eq 0 ] && echo clean || echo 'findings above')"
if [ $status -eq 0 ] && [ "$mode" = record ]; then
  cp "$log/fingerprint" "$list"
  echo "tidy: recorded $list"
fi
exit $status
