#!/usr/bin/env bash
# The sampler benchmark in one command: builds what is missing, then times ddph's DistributedSampler
# against Python's torch.utils.data.DistributedSampler in the same run and prints the ratios and
# the peak memory of one rank's indices at N = 10^8. Not a test; see docs/benchmarks.md (Sampler benchmark).
#   benchmarks/run_sampler_benchmark.sh [sampler_benchmark.py options…]   e.g. --no-python-rss
# Environment: DDPH_BUILD_DIR (default build), DDPH_PYTHON (default: the CMake cache's, else
# /usr/bin/python3: the first python3 on PATH may lack torch).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
build=${DDPH_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDDPH_BUILD_BENCHMARKS=ON >/dev/null
fi
cmake --build "$build" --target bench-sampler ddp-sim --parallel 2 >/dev/null
python=${DDPH_PYTHON:-}
if [ -z "$python" ]; then
  python=$(sed -n 's/^DDPH_PYTHON:FILEPATH=//p' "$build/CMakeCache.txt")
fi
python=${python:-/usr/bin/python3}
exec "$python" benchmarks/sampler_benchmark.py --bench "$build/bin/bench-sampler" \
  --ddp-sim "$build/bin/ddp-sim" "$@"
