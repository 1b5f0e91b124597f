#!/usr/bin/env bash
# For a machine with a CUDA LibTorch (a pip torch, or LibTorch from pytorch.org) but no package
# registry to install ddp-harness's other dependencies from (an air-gapped GPU box):
#   scripts/pack-deps.sh pack DIR            on Debian 12 with a registry: downloads the .debs of
#                                            the -dev packages below (no install) into DIR
#   scripts/pack-deps.sh unpack DIR PREFIX   on the GPU machine: unpacks DIR/*.deb into PREFIX with
#                                            dpkg -x (nothing is installed system-wide); then
#                                            DDPH_DEPS_PREFIX=PREFIX/usr scripts/gpu-check.sh
# Deliberately not here: LibTorch itself (the GPU machine's own, with CUDA) and libgloo (a CUDA
# LibTorch carries its own Gloo inside; linking Debian's second copy beside it would let one
# version's symbols stand in for the other's). CMake's "Which Gloo" step (CMakeLists.txt) decides.
# Exit: 0 done, 1 a download or unpack failed, 2 bad usage.
set -euo pipefail

packages=(
  libfmt-dev libfmt9                             # formatting
  nlohmann-json3-dev                             # JSON
  libcli11-dev                                   # command lines
  libtomlplusplus-dev libtomlplusplus3           # scenario files
  libboost1.74-dev libboost-filesystem1.74-dev libboost-filesystem1.74.0
  libboost-system1.74-dev libboost-system1.74.0 libboost-atomic1.74.0   # Boost.Process
  libgtest-dev libgmock-dev librapidcheck-dev    # tests, and ddp-sim's shrinking
  libgloo-dev                                    # headers only, used where LibTorch ships none
)

usage() { echo "usage: pack-deps.sh pack DIR | pack-deps.sh unpack DIR PREFIX" >&2; exit 2; }
[ $# -ge 2 ] || usage
case "$1" in
  pack)
    [ $# -eq 2 ] || usage
    mkdir -p "$2"
    (cd "$2" && apt-get download -qq "${packages[@]}") ||
      { echo "pack-deps: apt-get download failed (is this Debian 12 with a reachable registry?)" >&2; exit 1; }
    echo "pack-deps: $(ls "$2"/*.deb | wc -l) packages, $(du -sh "$2" | cut -f1), in $2"
    ;;
  unpack)
    [ $# -eq 3 ] || usage
    compgen -G "$2/*.deb" >/dev/null || { echo "pack-deps: no .deb files in $2" >&2; exit 1; }
    mkdir -p "$3"
    for f in "$2"/*.deb; do
      dpkg -x "$f" "$3" || { echo "pack-deps: cannot unpack $f" >&2; exit 1; }
    done
    # libgloo-dev's own CMake package names a libgloo.so that is deliberately not carried.
    rm -rf "$3/usr/share/cmake/Gloo"
    echo "pack-deps: unpacked $(ls "$2"/*.deb | wc -l) packages into $3 (CMake prefix: $3/usr)"
    ;;
  *) usage ;;
esac
