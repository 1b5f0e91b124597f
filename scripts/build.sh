#!/usr/bin/env bash
# Configures and builds ddp-harness into build/ (binaries in build/bin/). Installs what is missing
# first when run as root. Extra arguments go to the CMake configure step.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
if [ "$(id -u)" -eq 0 ]; then
  scripts/install-deps.sh --no-data   # MNIST: fetched by scripts/test.sh (tests, ddp-train)
fi
build=${DDPH_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build" --parallel "$(nproc)"
