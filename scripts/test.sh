#!/usr/bin/env bash
# The whole test suite: installs what is missing (as root), configures, builds, runs ctest.
#   scripts/test.sh [ctest arguments…]      e.g. scripts/test.sh -L property
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
scripts/build.sh
build=${DDPH_BUILD_DIR:-build}
cd "$build"
ctest --output-on-failure --parallel "$(nproc)" --timeout 900 "$@"
