#!/bin/sh
# Builds for another architecture than the machine's (arm64 for Grace-based GPU nodes on an
# amd64 builder, or the other way round) with Debian's cross compiler and that
# architecture's -dev packages, and runs what it built under qemu-user. For the machine's
# own architecture every command is the plain native one, so deploy/Containerfile calls
# this script whatever it is building for.
#
# The target's -dev packages are downloaded with a private APT configuration (own sources,
# state and cache) and unpacked with dpkg -x into a sysroot: the machine's dpkg gets no
# foreign architecture and nothing is installed from them.
#
# Usage: cross.sh deps ARCH                 the cross compiler (apt) and ARCH's sysroot
#        cross.sh configure ARCH DIR ARGS... cmake -S . -B DIR -G Ninja ARGS, for ARCH
#        cross.sh strip ARCH IN OUT          strip IN (an ARCH binary) into OUT
#        cross.sh run ARCH PROGRAM ARGS...   run an ARCH program (qemu-user for a foreign one)
#        cross.sh sysroot ARCH               print the sysroot's path
# ARCH: a Debian architecture (amd64, arm64); empty means the machine's own.
# Env:   RDMANET_CROSS_CACHE  sysroots and the private APT state (/var/cache/rdmanet-cross)
set -eu

die() { echo "cross.sh: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: cross.sh deps|configure|strip|run|sysroot ARCH ..."
cmd=$1 arch=${2:-}
shift 2
native=$(dpkg --print-architecture)
[ -n "$arch" ] || arch=$native
case $arch in
  amd64) triple=x86_64-linux-gnu qemu=qemu-x86_64-static ;;
  arm64) triple=aarch64-linux-gnu qemu=qemu-aarch64-static ;;
  *) die "architecture \"$arch\": amd64 or arm64" ;;
esac
cache=${RDMANET_CROSS_CACHE:-/var/cache/rdmanet-cross}
sysroot=$cache/sysroot-$arch
# What the binaries link (static libnl and OpenSSL: tests/binary/elf_deps.sh) and what the unit
# tests link. Headers-only libraries (nlohmann/json, spdlog, fmt) are the same for every
# architecture: the machine's own copies serve.
target_pkgs="libnl-3-dev libnl-route-3-dev libssl-dev libgtest-dev libgmock-dev"

# deps: cross compiler, qemu-user, and the sysroot (kept until a package list changes).
deps() {
  [ "$arch" != "$native" ] || return 0
  missing=""
  for p in "g++-$triple" "binutils-$triple" qemu-user-static; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
  if [ -n "$missing" ]; then
    echo "cross.sh: installing$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
  fi
  stamp="$sysroot/.complete"
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$target_pkgs" ] && return 0
  mirror=$("$(dirname "$0")/debian_mirror.sh") || die "no Debian mirror in /etc/apt/sources*"
  codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
  apt=$cache/apt-$arch
  mkdir -p "$apt/lists/partial" "$apt/archives/partial"
  : >"$apt/status"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $codename main" \
    >"$apt/sources.list"
  for suite in "$codename-updates"; do
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" \
      >>"$apt/sources.list"
  done
  cat >"$apt/apt.conf" <<CONF
Dir::State "$apt";
Dir::State::lists "$apt/lists";
Dir::State::status "$apt/status";
Dir::Cache "$apt";
Dir::Cache::archives "$apt/archives";
Dir::Etc::SourceList "$apt/sources.list";
Dir::Etc::SourceParts "/nonexistent";
APT::Architecture "$arch";
APT::Architectures { "$arch"; };
APT::Install-Recommends "false";
Acquire::Languages "none";
Acquire::Retries "3";
APT::Sandbox::User "root";
CONF
  echo "cross.sh: downloading $target_pkgs for $arch from $mirror" >&2
  APT_CONFIG=$apt/apt.conf apt-get update -qq || die "apt-get update for $arch failed"
  # shellcheck disable=SC2086
  APT_CONFIG=$apt/apt.conf apt-get install --download-only -qq -y $target_pkgs >/dev/null ||
    die "cannot download $target_pkgs for $arch"
  rm -rf "$sysroot.tmp" && mkdir -p "$sysroot.tmp"
  # The -dev packages with their library dependencies (libnl-3-200, libssl3, ...), but not
  # the C library or the compiler's runtime: the cross compiler brings its own.
  for deb in "$apt/archives/"*.deb; do
    case $(basename "$deb") in
      libc6_* | libc6-dev_* | libgcc-s1_* | libstdc++6_* | libcrypt1_* | libcrypt-dev_* | \
        linux-libc-dev_* | libc-dev-bin_* | gcc-12-base_* | libgcc-12-dev_* | libstdc++-12-dev_*) ;;
      *) dpkg -x "$deb" "$sysroot.tmp" || die "cannot unpack $deb" ;;
    esac
  done
  rm -rf "$sysroot" && mv "$sysroot.tmp" "$sysroot"
  echo "$target_pkgs" >"$stamp"
}

# A CMake toolchain file for ARCH: the cross compiler, the sysroot for ARCH's libraries,
# CMake packages and pkg-config files, the machine's headers for the rest.
toolchain() {
  f=$sysroot/toolchain.cmake
  cat >"$f" <<CMAKE
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR $(echo "$triple" | cut -d- -f1))
set(CMAKE_C_COMPILER $triple-gcc)
set(CMAKE_CXX_COMPILER $triple-g++)
set(CMAKE_FIND_ROOT_PATH $sysroot /usr/$triple)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Headers: the sysroot's first (architecture-specific ones such as opensslconf.h), then
# the machine's architecture-independent ones (nlohmann/json, spdlog, fmt).
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
include_directories(SYSTEM $sysroot/usr/include/$triple $sysroot/usr/include)
# nlohmann/json's CMake package is architecture-independent: the machine's.
set(nlohmann_json_DIR /usr/share/cmake/nlohmann_json)
set(CMAKE_CROSSCOMPILING_EMULATOR $(command -v $qemu || echo $qemu);-L;/usr/$triple)
set(ENV{PKG_CONFIG_SYSROOT_DIR} $sysroot)
set(ENV{PKG_CONFIG_LIBDIR} $sysroot/usr/lib/$triple/pkgconfig:$sysroot/usr/share/pkgconfig)
CMAKE
  echo "$f"
}

case $cmd in
  deps) deps ;;
  sysroot) echo "$sysroot" ;;
  configure)
    [ $# -ge 1 ] || die "usage: cross.sh configure ARCH DIR CMAKE-ARGS..."
    dir=$1
    shift
    if [ "$arch" = "$native" ]; then
      cmake -S . -B "$dir" -G Ninja "$@"
    else
      [ -f "$sysroot/.complete" ] || die "no $arch sysroot: run cross.sh deps $arch first"
      cmake -S . -B "$dir" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$(toolchain)" "$@"
    fi
    ;;
  strip)
    [ $# -eq 2 ] || die "usage: cross.sh strip ARCH IN OUT"
    if [ "$arch" = "$native" ]; then strip -o "$2" "$1"; else "$triple-strip" -o "$2" "$1"; fi
    ;;
  run)
    [ $# -ge 1 ] || die "usage: cross.sh run ARCH PROGRAM ARGS..."
    if [ "$arch" = "$native" ]; then exec "$@"; fi
    command -v "$qemu" >/dev/null || die "$qemu missing (cross.sh deps $arch installs it)"
    # The C library and loader of the cross toolchain's target tree.
    exec "$qemu" -L "/usr/$triple" "$@"
    ;;
  *) die "unknown command \"$cmd\"" ;;
esac
