#!/bin/sh
# The whole test suite: installs what it needs, builds, checks formatting and
# runs every test tier that exists. Run as root (the netns tests create
# network namespaces and links).
set -eu
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "tests/run.sh: run as root (netns tests need CAP_NET_ADMIN)" >&2; exit 1; }

tests/tools/deps.sh all
# Unity builds (batches of 16 files per compiler run) take a third of the time of one
# run per file on 2 cores: most of it goes to nlohmann/json, gtest and fmt templates,
# instantiated once per batch instead of once per file. Developers' builds (no flag)
# compile file by file, which is what catches a missing include.
unity="-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16"
# shellcheck disable=SC2086 # $unity: two options
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $unity
ninja -C build
tests/lint/check_format.sh
# clang-tidy on what changed since the last full clean run (.ci/tidy-clean; see the script).
tests/lint/tidy.sh build --changed
(cd build && ctest --output-on-failure --timeout 300 -j2)

# Sanitizers and fuzzing, in one clang build where everything has ASan+UBSan
# (and fuzzer coverage): the unit and integration tests again, with the
# sanitized binaries (not the QEMU lab, the ELF check, the image tier, cross_arm64
# or the exec'd-IPAM fault injection: see README.md's Tests and the CMakeLists.txt),
# then each libFuzzer target replays its seed corpus (tests/fuzz/corpus) and
# fuzzes for a bounded time.
# shellcheck disable=SC2086
cmake -S . -B build-san -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DRDMANET_FUZZ=ON $unity \
  -DRDMANET_TESTS=ON -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -gline-tables-only" \
  -DRDMANET_FUZZ_SECONDS=10
ninja -C build-san
(cd build-san && ctest --output-on-failure --timeout 300 -j2)
