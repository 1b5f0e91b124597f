#!/usr/bin/env bash
# Unpacks Debian's OpenBLAS (libopenblas0-pthread) into a private folder, without installing it:
# installing would switch the system-wide libblas.so.3 alternative for every program on the
# machine. Debian's LibTorch calls the generic libblas.so.3 (reference BLAS by default, about
# 45x slower on the benchmark's GEMM); the DDP benchmark can run against OpenBLAS instead with
#   DDPH_BLAS_DIR=$(scripts/fetch-openblas.sh) benchmarks/run_ddp_benchmark.sh
# Prints the folder that holds libblas.so.3.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=${1:-$here/build/openblas}
lib=$dest/usr/lib/x86_64-linux-gnu/openblas-pthread
if [ ! -e "$lib/libblas.so.3" ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/ddph-openblas-XXXXXX")
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && apt-get download libopenblas0-pthread >/dev/null 2>&1)
  mkdir -p "$dest"
  dpkg -x "$work"/libopenblas0-pthread_*.deb "$dest"
fi
echo "$lib"
