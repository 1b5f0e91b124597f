#!/usr/bin/env bash
# The soak (docs/reliability.md, "Soak"): RUNS consecutive `ddp-sim run`s (default 200), each with
# one randomly drawn fault (a rank killed, a rank stopped, a slow rank, per-rank seeds, uneven
# batches, or none) at a random W of at most MAX_WORLD (default 64). Every run must be diagnosed
# with the injected property within its deadline and leave no process, temp file or /dev/shm
# entry behind; the summary gives the wall times, the largest per-rank peak RSS and MemAvailable
# before and after. Exits 1 if any run failed (its scenario and report are kept and named).
#   scripts/soak.sh [RUNS [MAX_WORLD [SEED]]]
# Builds first (scripts/build.sh), so it needs what scripts/test.sh needs.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
runs=${1:-200} max_world=${2:-64} seed=${3:-}
[[ $runs =~ ^[1-9][0-9]{0,5}$ && $max_world =~ ^[1-9][0-9]{0,3}$ && $seed =~ ^[0-9]{0,10}$ ]] ||
  { echo "soak: RUNS, MAX_WORLD and SEED must be positive numbers" >&2; exit 2; }
scripts/build.sh >/dev/null
args=(--ddp-sim "${DDPH_BUILD_DIR:-build}/bin/ddp-sim" --runs "$runs" --max-world "$max_world")
[[ -n $seed ]] && args+=(--seed "$seed")
exec python3 scripts/soak.py "${args[@]}"
