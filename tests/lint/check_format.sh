#!/bin/sh
# Fails when a C++ source differs from the repo's .clang-format.
set -eu
cd "$(dirname "$0")/../.."
files=$(git ls-files -co --exclude-standard -- '*.cc' '*.h' | grep -v '^build' || true)
[ -n "$files" ] || { echo "no sources found" >&2; exit 1; }
# shellcheck disable=SC2086
clang-format --dry-run -Werror $files
echo "clang-format: $(echo "$files" | wc -l) files clean"
