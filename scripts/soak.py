#!/usr/bin/env python3
"""The soak: RUNS consecutive `ddp-sim run`s, each with one randomly drawn fault at a random W.

    scripts/soak.py --ddp-sim PATH [--runs 200] [--max-world 64] [--seed S] [--kinds K,…] [--no-shm-check]

Each run is a scenario file drawn from the seed (printed, so a run can be replayed): a rank
SIGKILLed at a step (`kill`), a rank SIGSTOPped at a step (`hang`), a rank 50 ms slower per step
(`delay`), every rank seeding its sampler with seed + rank (`seed-skew`), a hand-rolled
`indices[rank::W]` sharding that gives some ranks one more batch (`uneven`), or no fault at all
(`healthy`). After every run it checks, and counts as a failure of that run:
  - the exit code (1 with a fault, 0 without) and the JSON report: the injected property is among
    the violations, naming the injected rank(s) (and epoch and step for kill and hang); a healthy
    run has no violation;
  - the run ended within its deadline (this driver's own, generous: it kills the run past it);
  - no process is left: every process carrying this run's marker in its environment is gone;
  - no temporary file is left: the run's TMPDIR (a folder of its own) is empty, and no new entry
    appeared in /dev/shm.
At the end it prints the summary: runs and diagnoses per fault kind, wall time per kind, the
largest per-rank peak RSS, MemAvailable before the first run and after the last (memory flat: the
runs leave nothing resident), and exits 1 if any run failed. Standard library only. See
docs/reliability.md ("Soak").
"""
import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

KINDS = ["kill", "hang", "delay", "seed-skew", "uneven", "healthy"]
EXPECTED = {"kill": "rank-failure", "hang": "rank-failure", "delay": "straggler",
            "seed-skew": "coverage", "uneven": "collective-mismatch", "healthy": None}
HANG_TIMEOUT_S = 10      # the scenario's collective timeout in `hang` runs (the others wait this long)
RUN_TIMEOUT_S = 600      # ddp-sim run --timeout: the run's own deadline
DRIVER_DEADLINE_S = 900  # this driver's deadline for one run, past ddp-sim's own


def draw(rng, max_world, kind=None):
    """One run: (kind, world, scenario TOML text, what the report must name)."""
    kind = kind or rng.choice(KINDS)
    world = rng.randint(2, max_world)
    batch = rng.choice([4, 8, 16])
    steps = rng.randint(3, 8)
    epochs = rng.randint(1, 2)
    size = world * batch * steps
    sampler = "pytorch"
    faults = []
    want = {"property": EXPECTED[kind]}
    timeout_s = 60
    if kind in ("kill", "hang"):
        rank = rng.randrange(world)
        epoch = rng.randrange(epochs)
        step = rng.randrange(steps)
        key = "kill" if kind == "kill" else "stop"
        faults.append(f"{key} = {{ rank = {rank}, epoch = {epoch}, step = {step} }}")
        want.update(ranks=[rank], epoch=epoch, step=step)
        if kind == "hang":
            timeout_s = HANG_TIMEOUT_S
    elif kind == "delay":
        rank = rng.randrange(world)
        faults.append(f"delay = {{ rank = {rank}, ms = 50 }}")
        want.update(ranks=[rank])
    elif kind == "seed-skew":
        faults.append("per_rank_seed = true")
    elif kind == "uneven":
        sampler = "strided"
        extra = rng.randint(1, world - 1)   # ranks 0..extra-1 get one more sample: one more batch
        size += extra
        want.update(ranks=list(range(extra, world)), epoch=0)
    toml = "\n".join([
        f'name = "soak-{kind}"', f"world_size = {world}", f"epochs = {epochs}",
        f"batch_size = {batch}", f"timeout_s = {timeout_s}", "[[datasets]]", 'name = "train"',
        f"size = {size}", f'sampler = "{sampler}"', "[faults]", *faults, ""])
    return kind, world, toml, want


def marked_processes(marker):
    """Pids of the processes whose environment carries `marker` (ours only: others' are unreadable)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker in f.read():
                    found.append(int(entry))
        except OSError:
            pass
    return found


def orphan_check_works():
    """Shows the orphan check can fail: a process started with a marker is found, then killed."""
    marker = f"DDPH_SOAK_RUN={os.getpid()}-self-check"
    env = dict(os.environ, DDPH_SOAK_RUN=marker.split("=", 1)[1])
    probe = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], env=env,
                             stdin=subprocess.PIPE)
    try:
        return marked_processes(marker.encode() + b"\0") == [probe.pid]
    finally:
        probe.kill()
        probe.wait()


def mem_available_mb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def judge(kind, want, code, report):
    """The run's diagnosis against the injected fault: '' when right, else what is wrong."""
    if report is None:
        return f"no JSON report (exit {code})"
    violations = report.get("violations", [])
    if want["property"] is None:
        if code != 0 or violations:
            return f"healthy run: exit {code}, {[v['property'] for v in violations]}"
        return ""
    if code != 1:
        return f"exit {code}, expected 1"
    for v in violations:
        if v.get("property") != want["property"]:
            continue
        if "ranks" in want and sorted(v.get("ranks", [])) != want["ranks"]:
            continue
        if "epoch" in want and v.get("epoch") != want["epoch"]:
            continue
        if "step" in want and v.get("step") != want["step"]:
            continue
        return ""
    got = [(v.get("property"), v.get("ranks"), v.get("epoch"), v.get("step")) for v in violations]
    return f"expected {want}, got {got}"


def run_one(args, index, kind, world, toml, want, workdir):
    folder = os.path.join(workdir, f"run{index}")
    tmp = os.path.join(folder, "tmp")
    os.makedirs(tmp)
    scenario = os.path.join(folder, "scenario.toml")
    report_path = os.path.join(folder, "report.json")
    with open(scenario, "w") as f:
        f.write(toml)
    marker = f"DDPH_SOAK_RUN={os.getpid()}-{index}"
    env = dict(os.environ, TMPDIR=tmp, DDPH_SOAK_RUN=marker.split("=", 1)[1])
    shm_before = set(os.listdir("/dev/shm"))
    start = time.monotonic()
    proc = subprocess.Popen([args.ddp_sim, "run", scenario, "--report", report_path, "-q",
                             "--timeout", str(RUN_TIMEOUT_S)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    problems = []
    try:
        _, err = proc.communicate(timeout=DRIVER_DEADLINE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        problems.append(f"still running after {DRIVER_DEADLINE_S} s")
    wall = time.monotonic() - start
    report = None
    if os.path.exists(report_path):
        with open(report_path) as f:
            report = json.load(f)
    verdict = judge(kind, want, proc.returncode, report)
    if verdict:
        problems.append(verdict + (f"; stderr: {err.decode(errors='replace').strip()[:300]}" if err else ""))
    left = marked_processes(marker.encode() + b"\0")
    counts = {"processes": len(left), "temp": 0, "shm": 0}
    if left:
        problems.append(f"{len(left)} process(es) left: {left[:8]}")
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    leftovers = os.listdir(tmp)
    counts["temp"] = len(leftovers)
    if leftovers:
        problems.append(f"temp files left in TMPDIR: {leftovers[:8]}")
    new_shm = set() if args.no_shm_check else set(os.listdir("/dev/shm")) - shm_before
    counts["shm"] = len(new_shm)
    if new_shm:
        problems.append(f"new /dev/shm entries: {sorted(new_shm)[:8]}")
    rss = 0.0
    if report is not None:
        rss = report.get("timings", {}).get("peak_rss_mb_max", 0.0)
    if not problems:
        shutil.rmtree(folder)
    return wall, rss, problems, counts, folder


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ddp-sim", required=True)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--max-world", type=int, default=64)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--no-shm-check", action="store_true",
                        help="skip the /dev/shm check: under ctest other tests (Python DataLoader "
                             "workers) create and remove semaphores there at the same time, so a "
                             "new entry cannot be told apart from theirs")
    parser.add_argument("--kinds", default=None,
                        help="comma-separated fault kinds taken in turn instead of drawn (the ctest's "
                             "short soak leaves out the timing-based 'delay')")
    args = parser.parse_args()
    if args.runs < 1 or args.max_world < 2:
        print("soak: --runs must be at least 1 and --max-world at least 2", file=sys.stderr)
        return 2
    kinds = args.kinds.split(",") if args.kinds else None
    if kinds and not set(kinds) <= set(KINDS):
        print(f"soak: --kinds takes some of {','.join(KINDS)}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    print(f"soak: {args.runs} runs, W in [2, {args.max_world}], seed {seed}", flush=True)
    if not orphan_check_works():
        print("soak: cannot see a marked process in /proc: the orphan check would not work", file=sys.stderr)
        return 2
    workdir = tempfile.mkdtemp(prefix="ddph-soak-")
    kept = False
    walls = {k: [] for k in KINDS}
    failures = {k: 0 for k in KINDS}
    worst_rss = 0.0
    left = {"processes": 0, "temp": 0, "shm": 0}
    mem_start = mem_available_mb()
    started = time.monotonic()
    try:
        for i in range(1, args.runs + 1):
            kind, world, toml, want = draw(rng, args.max_world,
                                           kinds[(i - 1) % len(kinds)] if kinds else None)
            wall, rss, problems, counts, folder = run_one(args, i, kind, world, toml, want, workdir)
            walls[kind].append(wall)
            worst_rss = max(worst_rss, rss)
            for key, n in counts.items():
                left[key] += n
            if problems:
                failures[kind] += 1
                kept = True
                print(f"run {i}: {kind} W={world}: FAILED ({wall:.1f} s): {'; '.join(problems)}"
                      f" [scenario and report kept in {folder}]", flush=True)
            elif i % 20 == 0 or i == args.runs:
                print(f"run {i}: ok so far ({time.monotonic() - started:.0f} s)", flush=True)
    finally:
        if not kept:
            shutil.rmtree(workdir, ignore_errors=True)
    mem_end = mem_available_mb()
    total_failed = sum(failures.values())
    for kind in KINDS:
        w = walls[kind]
        if not w:
            continue
        print(f"  {kind:<10} {len(w) - failures[kind]:>3} of {len(w):>3} diagnosed right; wall "
              f"median {statistics.median(w):.2f} s, max {max(w):.2f} s")
    print(f"  left behind: {left['processes']} processes, {left['temp']} temp files, "
          f"{left['shm']} /dev/shm entries; largest per-rank peak RSS {worst_rss:.1f} MB; "
          f"MemAvailable {mem_start:.0f} MB before the first run, {mem_end:.0f} MB after the last")
    print(f"soak: {args.runs - total_failed} of {args.runs} runs right, {total_failed} failed, "
          f"{time.monotonic() - started:.0f} s, seed {seed}")
    return 1 if total_failed else 0


if __name__ == "__main__":
    sys.exit(main())
