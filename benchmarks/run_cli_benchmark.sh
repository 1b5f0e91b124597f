#!/usr/bin/env bash
# ddp-sim's start-up and JSON output against Python's torch in the same run (a benchmark, not a
# test; docs/benchmarks.md, "ddp-sim start-up and JSON").
#   benchmarks/run_cli_benchmark.sh [cli_benchmark.py options…]   e.g. --repeats 10
# Environment: DDPH_BUILD_DIR (default build), DDPH_PYTHON (default: the CMake cache's, else
# /usr/bin/python3: the first python3 on PATH may lack torch).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
build=${DDPH_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" --target ddp-sim --parallel 2 >/dev/null
python=${DDPH_PYTHON:-}
if [ -z "$python" ]; then
  python=$(sed -n 's/^DDPH_PYTHON:FILEPATH=//p' "$build/CMakeCache.txt")
fi
python=${python:-/usr/bin/python3}
exec "$python" benchmarks/cli_benchmark.py --ddp-sim "$build/bin/ddp-sim" "$@"
