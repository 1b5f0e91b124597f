#!/usr/bin/env bash
# The C++ DDP step with each Gloo engine (NOTE [Gloo engines]), alternating runs, medians: on a
# shared machine only runs interleaved in time compare. Not a test.
#   benchmarks/gloo_engines_ab.sh                 7 rounds, W = 2 and 4, 300 steps
#   ROUNDS=3 WORLDS="2" benchmarks/gloo_engines_ab.sh
# DDPH_BLAS_DIR as for run_ddp_benchmark.sh (scripts/fetch-openblas.sh).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${DDPH_BUILD_DIR:-$here/build}/bin/ddp_step_benchmark
. "$here/benchmarks/blas_env.sh"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for _ in $(seq "${ROUNDS:-7}"); do
  for engine in direct process-group; do
    DDPH_GLOO_ENGINE=$engine "$bin" --steps "${STEPS:-300}" --worlds ${WORLDS:-2 4} | sed "s/^/$engine /" >> "$out"
  done
done
/usr/bin/python3 - "$out" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    engine, _, mode, world, ms = line.split()
    runs[(mode, world, engine)].append(float(ms.split("=")[1]))
for (mode, world, engine), v in sorted(runs.items()):
    print(f"{mode:5} {world:4} {engine:13} median {statistics.median(v):7.3f} ms/step  "
          f"min {min(v):.2f} max {max(v):.2f}  n={len(v)}")
PY
