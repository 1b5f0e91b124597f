#!/usr/bin/env bash
# The audit recorder's cost per DDP step, in one process (benchmarks/audit_step_cost.py).
# DDPH_BLAS_DIR: another libblas.so.3 (scripts/fetch-openblas.sh), one BLAS thread.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$here/benchmarks/blas_env.sh"
export OMP_NUM_THREADS=1
exec "${DDPH_BENCH_PYTHON:-/usr/bin/python3}" "$here/benchmarks/audit_step_cost.py" "$@"
