#!/usr/bin/env python3
"""What elastic resume costs, against torch's DistributedSampler measured in the same run.

At N = 10^7 (default), rank 0 of W = 8:
  python  torch DistributedSampler: list(sampler) after set_epoch       (the peer)
  python  ElasticDistributedSampler, never resumed                      (the same indices)
  python  ElasticDistributedSampler, resumed on 8 after 4 ranks took N/8 each (load_state_dict + list)
  C++     ddp-sim sampler --sampler pytorch|elastic [--resume 4:C] --rank 0 --json > file
Each in a fresh process (imports and start-up included, as a resumed job pays them); medians of
--repeats runs. The state itself is a handful of integers: state_dict() and load_state_dict() are
timed apart, and nothing is done per step beyond yielding the next index.
Exit codes: 0 done, 1 the samplers disagree, 2 bad arguments or a failure to run.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGES = os.path.join(os.path.dirname(HERE), "python")

PY = """
import json, sys, time
from torch.utils.data import DistributedSampler
from ddph_elastic import ElasticDistributedSampler
kind, n, w, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
class Sized:
    def __len__(self): return n
cls = DistributedSampler if kind == "torch" else ElasticDistributedSampler
s = cls(Sized(), num_replicas=w, rank=0, seed=0)
s.set_epoch(0)
t_state = 0.0
if kind == "resumed":
    t = time.perf_counter()
    state = s.state_dict(consumed=n // 8)
    state["num_replicas"] = 4
    s.load_state_dict(json.loads(json.dumps(state)))
    t_state = time.perf_counter() - t
t = time.perf_counter()
indices = list(s)
t_iterate = time.perf_counter() - t
with open(out, "w") as f:
    json.dump({"n": len(indices), "head": indices[:5], "sum": sum(indices), "state_s": t_state,
               "iterate_s": t_iterate}, f)
"""


def timed(argv, env=None, stdout=None):
    start = time.perf_counter()
    subprocess.run(argv, check=True, env=env, stdout=stdout, stderr=subprocess.PIPE)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ddp-sim", required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("-N", type=int, default=10_000_000)
    parser.add_argument("-W", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    a = parser.parse_args()
    if a.N < 8 or a.W < 1 or a.repeats < 1:
        print("elastic_benchmark: N >= 8, W >= 1 and repeats >= 1", file=sys.stderr)
        return 2
    env = dict(os.environ, PYTHONPATH=PACKAGES, OMP_NUM_THREADS="1")
    consumed = a.N // 8
    rows, results = [], {}
    with tempfile.TemporaryDirectory(prefix="ddph-elastic-bench-") as tmp:
        out = os.path.join(tmp, "out.json")
        iterate = {}
        for kind in ("torch", "elastic", "resumed"):
            times, inner = [], []
            for _ in range(a.repeats):
                times.append(timed([a.python, "-c", PY, kind, str(a.N), str(a.W), out], env))
                with open(out) as f:
                    results[kind] = json.load(f)
                inner.append(results[kind]["iterate_s"])
            rows.append((f"python {kind}", statistics.median(times)))
            iterate[kind] = statistics.median(inner)
        for sampler, resume in (("pytorch", None), ("elastic", None), ("elastic", f"4:{consumed}")):
            argv = [a.ddp_sim, "sampler", "--sampler", sampler, "-N", str(a.N), "-W", str(a.W),
                    "--rank", "0", "--json"]
            if resume:
                argv += ["--resume", resume]
            times = []
            for _ in range(a.repeats):
                with open(out, "w") as f:
                    times.append(timed(argv, stdout=f))
            rows.append((f"C++ {sampler}{' --resume ' + resume if resume else ''}",
                         statistics.median(times)))
    if results["torch"]["sum"] != results["elastic"]["sum"] or results["torch"]["head"] != results["elastic"]["head"]:
        print("elastic_benchmark: never resumed, the elastic sampler differs from torch's", file=sys.stderr)
        return 1
    peer = rows[0][1]
    print(f"N = {a.N}, rank 0 of W = {a.W}; medians of {a.repeats} fresh processes; "
          f"resumed = after 4 ranks took {consumed} each")
    print(f"  {'':44} {'seconds':>8} {'vs torch':>9}")
    for name, seconds in rows:
        print(f"  {name:44} {seconds:8.3f} {seconds / peer:8.2f}x")
    print("  in-process list(sampler), import and start-up left out: torch {:.3f} s, elastic {:.3f} s "
          "({:.2f}x), resumed {:.3f} s ({:.2f}x)".format(
              iterate["torch"], iterate["elastic"], iterate["elastic"] / iterate["torch"],
              iterate["resumed"], iterate["resumed"] / iterate["torch"]))
    print(f"  resumed run: {results['resumed']['n']} indices (never resumed: {results['elastic']['n']});"
          f" state_dict + load_state_dict took {results['resumed']['state_s'] * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
