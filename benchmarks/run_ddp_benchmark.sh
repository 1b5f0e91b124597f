#!/usr/bin/env bash
# One command for the DDP step benchmark: C++ (ddph::DistributedDataParallel) beside Python's
# torch DDP (gloo) in the same run, with ratios. Arguments go to ddp_step_benchmark.py
# (--steps, --repeats, --worlds). Build first (scripts/build.sh); DDPH_BUILD_DIR picks the build.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${DDPH_BUILD_DIR:-$here/build}
# DDPH_BLAS_DIR: a folder with another libblas.so.3 (scripts/fetch-openblas.sh) for both sides,
# one BLAS thread per rank like one torch thread per rank.
if [ -n "${DDPH_BLAS_DIR:-}" ]; then
  export LD_LIBRARY_PATH=$DDPH_BLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export OPENBLAS_NUM_THREADS=1
fi
# Python's torch lives in the system Python (the first python3 on PATH may have none).
exec /usr/bin/python3 "$here/benchmarks/ddp_step_benchmark.py" --cpp "$build/bin/ddp_step_benchmark" "$@"
