#!/usr/bin/env bash
# The whole suite under load: RUNS times in a row (default 3), each as CI runs it (ctest --parallel
# $(nproc)), beside BURNERS CPU-bound processes (default 2). A test that orders events by time
# rather than by pipes, files or the store shows up here as a failure.
#   scripts/stress-tests.sh [RUNS [BURNERS]] [-- ctest arguments…]
# Prints one line a run and a summary; exits 1 when any run had a failure. Builds first
# (scripts/build.sh), so it needs what scripts/test.sh needs.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
runs=3 burners=2
if [[ $# -gt 0 && $1 != -- ]]; then runs=$1; shift; fi
if [[ $# -gt 0 && $1 != -- ]]; then burners=$1; shift; fi
[[ $# -gt 0 && $1 == -- ]] && shift
[[ $runs =~ ^[1-9][0-9]*$ && $burners =~ ^[0-9]+$ ]] ||
  { echo "stress-tests: RUNS must be a positive number and BURNERS a number" >&2; exit 2; }

scripts/build.sh >/dev/null
scripts/fetch-mnist.sh >/dev/null
build=${DDPH_BUILD_DIR:-build}
logs=$(mktemp -d "${TMPDIR:-/tmp}/ddph-stress-XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$logs"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The load: busy loops, one core each, for as long as the runs last.
for ((b = 0; b < burners; b++)); do
  sha256sum /dev/zero >/dev/null &
  pids+=($!)
done

failed_runs=0
for ((run = 1; run <= runs; run++)); do
  start=$(date +%s)
  status=0
  # A deadline for the whole run on top of ctest's per-test timeouts.
  timeout --kill-after=60 5400 ctest --test-dir "$build" --parallel "$(nproc)" --timeout 900 \
    --output-on-failure "$@" >"$logs/run$run.log" 2>&1 || status=$?
  seconds=$(($(date +%s) - start))
  summary=$(grep -E '^[0-9]+% tests passed' "$logs/run$run.log" || echo "no ctest summary (exit $status)")
  load=$(cut -d' ' -f1 /proc/loadavg)
  echo "run $run of $runs: $summary; ${seconds} s; load average $load at the end"
  if [[ $status -ne 0 ]]; then
    failed_runs=$((failed_runs + 1))
    sed -n '/The following tests FAILED/,$p' "$logs/run$run.log"
  fi
done
echo "stress-tests: $failed_runs of $runs runs had failures, beside $burners CPU-bound processes on $(nproc) cores"
[[ $failed_runs -eq 0 ]]
