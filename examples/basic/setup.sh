#!/usr/bin/env bash
# Make a fresh git repository from the example project and run git-arbiter's
# read-only kernels on it: `git arbiter status` (the reconcile table) and
# `git arbiter batch` (which work orders may run together).
#
# Usage: examples/basic/setup.sh [DIR]   (default: a new temporary directory)
# Needs `git-arbiter` on PATH (`cargo install --path .`).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-$(mktemp -d "${TMPDIR:-/tmp}/arbiter-example.XXXXXX")}"
if [ -e "$dir/.git" ]; then
    echo "error: $dir is already a git repository; name a new directory" >&2
    exit 2
fi

mkdir -p "$dir"
cp -R "$here/project/." "$dir/"
cd "$dir"
git init -q -b main
git add -A
# A fixed identity, so this works on a machine where git has none configured yet.
git -c user.name="Example" -c user.email="example@example.com" commit -q -m "Example project"

echo "example repository: $dir"
echo
echo "\$ git arbiter status"
git arbiter status
echo
echo "\$ git arbiter batch"
git arbiter batch
