#!/bin/sh
# The node binaries are copied onto hosts of other distributions: they may
# depend on glibc and nothing else (the ELF NEEDED entries), on no glibc newer
# than 2.34 (Ubuntu 22.04, RHEL 9; the versioned symbols they import), and C++
# exceptions must still unwind with base/glibc_compat.cc standing in for
# glibc 2.35's _dl_find_object (a logFile spdlog cannot open throws inside the
# binary; the call must catch it, warn, and go on).
# Binaries of another architecture (arm64 on an amd64 builder) are run under qemu-user
# (tests/tools/cross.sh run).
set -eu
max_glibc=2.34
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
  case $(readelf -h "$bin" | sed -n 's/^ *Machine: *//p') in
    AArch64) arch=arm64 ;;
    *X86-64) arch=amd64 ;;
    *) echo "FAIL: $bin is for neither amd64 nor arm64" >&2; status=1; continue ;;
  esac
  # readelf, not objdump: it reads every architecture's symbol versions.
  imports=$(readelf --dyn-syms -W "$bin")
  newest=$(echo "$imports" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1)
  if [ "$(printf '%s\n%s\n' "$newest" "$max_glibc" | sort -V | tail -n 1)" != "$max_glibc" ]; then
    echo "FAIL: $bin needs glibc $newest (at most $max_glibc):" >&2
    echo "$imports" | grep "GLIBC_$newest" >&2
    status=1
  fi
  tmp=$(mktemp -d)
  rc=0
  printf '{"cniVersion":"1.0.0","name":"n","type":"rdmanet","logFile":"/proc/version/x/y.log","stateDir":"%s/s","ipam":{"type":"rdmanet-ipam","dataDir":"%s/i","ranges":[[{"subnet":"10.9.0.0/24"}]]}}' "$tmp" "$tmp" |
    CNI_COMMAND=DEL CNI_CONTAINERID=x CNI_IFNAME=net1 CNI_PATH=/nonexistent \
    "$(dirname "$0")/../tools/cross.sh" run "$arch" "$bin" >/dev/null 2>"$tmp/err" || rc=$?
  if [ $rc -ge 128 ] || ! grep -q "cannot open logFile /proc/version/x/y.log" "$tmp/err"; then
    echo "FAIL: $bin did not survive a caught exception (exit $rc): $(cat "$tmp/err")" >&2
    status=1
  fi
  rm -rf "$tmp"
  echo "$bin ($arch): $(echo $needed), glibc >= $newest, exceptions unwind"
done
exit $status
