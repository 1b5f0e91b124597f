#!/usr/bin/env bash
# The main job, for a first look: builds ddp-harness (installing what is missing when run as root),
# then shows how PyTorch's DistributedSampler splits a small dataset across ranks with the property
# report, and what the property suite finds in LibTorch's own C++ sampler.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
scripts/build.sh >/dev/null
sim=${DDPH_BUILD_DIR:-build}/bin/ddp-sim

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step ddp-sim sampler --dataset-size 10 --world-size 4 --epoch 1 --batch-size 2 --check
"$sim" sampler --dataset-size 10 --world-size 4 --epoch 1 --batch-size 2 --check

step ddp-sim sampler --dataset-size 1 --world-size 3 --sampler libtorch-random --check
rc=0
"$sim" sampler --dataset-size 1 --world-size 3 --sampler libtorch-random --check || rc=$?
if [ "$rc" -ne 1 ]; then
  echo "demo: expected LibTorch's DistributedRandomSampler to violate a property (exit 1), got exit $rc" >&2
  exit 1
fi
echo "(exit 1: a property is violated — LibTorch pads past the end of a tiny dataset)"
