#!/bin/sh
# Installs what building and testing rdmanet needs, from Debian's packages.
# Idempotent: does nothing when everything is already installed.
# Usage: tests/tools/deps.sh [build|test|all]   (default: all)
#   build: what compiling the two node binaries needs (deploy/Containerfile's build stage)
#   test:  what the test tiers run (compilers for the tests, linters, peers, podman, the
#          image and cross-build tiers' tools)
set -eu

build_pkgs="cmake ninja-build g++ pkg-config libnl-3-dev libnl-route-3-dev nlohmann-json3-dev
  libspdlog-dev libfmt-dev libssl-dev linux-libc-dev binutils"
test_pkgs="libgtest-dev libgmock-dev clang-format clang-tidy iproute2 iputils-ping tcpdump containernetworking-plugins binutils procps time podman runc busybox-static strace
  python3 python3-yaml clang libclang-rt-14-dev etcd-server etcd-client openssl
  containerd python3-grpcio python3-protobuf protobuf-compiler protobuf-compiler-grpc
  python3-prometheus-client debootstrap g++-aarch64-linux-gnu qemu-user-static"

case "${1:-all}" in
  build) pkgs="$build_pkgs" ;;
  test) pkgs="$test_pkgs" ;;
  all) pkgs="$build_pkgs $test_pkgs" ;;
  *) echo "usage: $0 [build|test|all]" >&2; exit 2 ;;
esac

missing=""
# kubectl (for the kustomize tests) may come from elsewhere (a newer one from
# the cloud SDK); install Debian's only when there is none.
if [ "${1:-all}" != build ] && ! command -v kubectl >/dev/null 2>&1; then
  pkgs="$pkgs kubernetes-client"
fi
for p in $pkgs; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "deps.sh: missing packages:$missing (run as root to install them)" >&2
  exit 1
fi
echo "deps.sh: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Packaged services (containerd, etcd) must not start: the tests run their own, with
# private configs. A policy-rc.d that refuses every start does it, ours only if there
# was none.
policy=/usr/sbin/policy-rc.d
if [ ! -e $policy ]; then
  printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy
  trap 'rm -f $policy' EXIT
fi
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
