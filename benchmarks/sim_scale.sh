#!/usr/bin/env bash
# Scale benchmark of `ddp-sim run` (real rank processes, real TCPStore + Gloo collectives) against
# Python (torch.multiprocessing.spawn + gloo init_process_group + all_reduce), same W, same run.
# Not a test: prints figures and ratios.
#   benchmarks/sim_scale.sh                     W = 32 vs Python, then ddp-sim alone at 256 and 512
#   SIM_WORLDS="32 128" PY_WORLDS="8 32" benchmarks/sim_scale.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sim=${DDPH_SIM:-$here/build/bin/ddp-sim}
py=${DDPH_PYTHON:-/usr/bin/python3}
py_worlds=${PY_WORLDS:-32}
sim_worlds=${SIM_WORLDS:-32 256 512}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[ -x "$sim" ] || { echo "sim_scale: build ddp-sim first ($sim)" >&2; exit 2; }
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, load $(cut -d' ' -f1-3 /proc/loadavg)"

declare -A py_time
for w in $py_worlds; do
  start=$(date +%s.%N)
  inner=$(timeout 900 "$py" "$here/benchmarks/python_spawn_allreduce.py" "$w")
  end=$(date +%s.%N)
  py_time[$w]=$(echo "$end - $start" | bc)
  printf 'python  W=%-4s spawn+init+all_reduce: %6.2f s wall (%s s inside spawn)\n' "$w" "${py_time[$w]}" "$inner"
done

for w in $sim_worlds; do
  report=$tmp/report-$w.json
  start=$(date +%s.%N)
  rc=0
  timeout 900 "$sim" run healthy -n "$w" --report "$report" -q || rc=$?
  end=$(date +%s.%N)
  wall=$(echo "$end - $start" | bc)
  read -r total connect run rss_max rss_mean passed < <("$py" - "$report" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["timings"]
print(t["total_s"], t["connect_s"], t["run_s"], t["peak_rss_mb_max"], t["peak_rss_mb_mean"], r["passed"])
PY
)
  printf 'ddp-sim W=%-4s run healthy: %6.2f s wall (connect %.1f s, epochs %.1f s), passed=%s, exit %s, peak RSS per rank %.0f MB max / %.0f MB mean' \
    "$w" "$wall" "$connect" "$run" "$passed" "$rc" "$rss_max" "$rss_mean"
  if [ -n "${py_time[$w]:-}" ]; then
    printf ', %.1fx faster than Python' "$(echo "${py_time[$w]} / $wall" | bc -l)"
  fi
  printf '\n'
done
