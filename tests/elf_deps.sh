#!/bin/sh
# The node binaries are copied onto hosts of other distributions: they may
# depend on glibc and nothing else. Reads each binary's ELF NEEDED entries.
set -eu
allowed="libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 ld-linux-x86-64.so.2 ld-linux-aarch64.so.1"
status=0
[ $# -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }
for bin in "$@"; do
  [ -x "$bin" ] || { echo "FAIL: $bin is not an executable" >&2; status=1; continue; }
  needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p')
  [ -n "$needed" ] || { echo "FAIL: $bin has no NEEDED entries (not a dynamic glibc binary?)" >&2; status=1; }
  for lib in $needed; do
    case " $allowed " in
      *" $lib "*) ;;
      *) echo "FAIL: $bin needs $lib (only glibc is allowed)" >&2; status=1 ;;
    esac
  done
  echo "$bin: $(echo $needed)"
done
exit $status
