#!/usr/bin/env bash
# One command for the DDP step benchmark: C++ (ddph::DistributedDataParallel) beside Python's
# torch DDP (gloo) in the same run, with ratios. Arguments go to ddp_step_benchmark.py
# (--steps, --repeats, --worlds). Build first (scripts/build.sh); DDPH_BUILD_DIR picks the build.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${DDPH_BUILD_DIR:-$here/build}
. "$here/benchmarks/blas_env.sh"
# Python's torch lives in the system Python (the first python3 on PATH may have none).
exec /usr/bin/python3 "$here/benchmarks/ddp_step_benchmark.py" --cpp "$build/bin/ddp_step_benchmark" "$@"
