#!/usr/bin/env bash
# Installs ddp-harness from its build tree into a private prefix, then configures, builds and tests
# examples/cpp against the INSTALLED package (find_package(ddph)), as a user's project would.
#   install_example_test.sh <build dir> <source dir> [python that imports torch]
set -euo pipefail
build=$1
source=$2
python=${3:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddph-install-example-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
generator=()
if command -v ninja > /dev/null; then generator=(-G Ninja); fi
cmake -S "$source/examples/cpp" -B "$tmp/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DDDPH_PYTHON="$python"
cmake --build "$tmp/build" --parallel 2
# The example must register its checks (3 GoogleTest tests, 1 built-in, the DDP step, one call
# into each library; 2 more with Python).
expected=6
if [ -n "$python" ]; then expected=8; fi
count=$(ctest --test-dir "$tmp/build" -N | sed -n 's/^Total Tests: //p')
if [ "$count" != "$expected" ]; then
  echo "install_example_test: expected $expected registered tests, found $count" >&2
  exit 1
fi
ctest --test-dir "$tmp/build" --output-on-failure --timeout 300 --parallel 2
