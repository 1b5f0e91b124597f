"""How fast real PyTorch ranks start and end: ddp-sim launch with its fork server, against the same
launcher exec'ing each rank (--exec) and against torchrun, in the same run, on one small healthy DDP
program (benchmarks/launch_program.py). A benchmark, not a test: figures, no pass or fail.

    python3 benchmarks/launch_startup.py --sim build/bin/ddp-sim [--worlds 8,32,128] [--repeat 3]
                                         [--largest 256]

Prints, per world size W, the median wall time of each way (with the ratio against the fork
server), the audit's verdict, and the ranks' mean proportional set size (PSS: shared pages divided
among the processes sharing them). --largest W also tries one plain launch at W (the largest world
this machine holds is the first W that fails). docs/benchmarks.md, "Starting Python ranks".
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "launch_program.py")


def timed(argv, env):
    start = time.monotonic()
    done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=1800)
    return time.monotonic() - start, done


def pss_mean_mb(output):
    values = [int(line.rsplit(" ", 1)[1]) for line in output.splitlines() if "pss_kb " in line]
    return sum(values) / len(values) / 1024 if values else float("nan")


def ways(sim, python, world, tmp):
    """name -> argv, for one world size."""
    launch = [sim, "launch", "-n", str(world), "--timeout", "900"]
    out = {
        "launch (fork server)": launch + ["--", python, PROGRAM],
        "launch --exec": launch + ["--exec", "--", python, PROGRAM],
        "launch --audit (fork server)": launch + ["--audit", "--", python, PROGRAM],
        "launch --audit --exec": launch + ["--audit", "--exec", "--", python, PROGRAM],
    }
    if world <= 8:
        # Debian's torchrun (torch 1.13) on Python 3.11 needs the redirect flags (docs/audit.md).
        out["torchrun"] = [python, "-m", "torch.distributed.run", "--nnodes", "1",
                           "--nproc_per_node", str(world), "--rdzv_backend", "c10d",
                           "--rdzv_endpoint", "127.0.0.1:0", "--redirects", "9:0", "--tee", "9:0",
                           PROGRAM]
    return out


def measure(args, world, env):
    with tempfile.TemporaryDirectory(prefix="ddph-launch-bench-") as tmp:
        run_env = dict(env, TMPDIR=tmp)
        rows = []
        for name, argv in ways(args.sim, args.python, world, tmp).items():
            if world > args.exec_up_to and "--exec" in argv:
                continue
            times, verdict, pss = [], "", float("nan")
            for _ in range(args.repeat):
                seconds, done = timed(argv, run_env)
                times.append(seconds)
                verdict = "exit %d" % done.returncode
                if "--audit" in argv:
                    verdict += ", " + ("PASSED" if "): PASSED" in done.stdout else "not passed")
                pss = pss_mean_mb(done.stdout)
            rows.append((name, statistics.median(times), verdict, pss))
    base = rows[0][1]
    print("W = %d (%d runs each, median)" % (world, args.repeat))
    for name, seconds, verdict, pss in rows:
        print("  %-30s %7.2f s  %5.2fx  %-18s PSS/rank %6.1f MB" % (
            name, seconds, seconds / base, verdict, pss))
    sys.stdout.flush()


def largest(args, env, world):
    with tempfile.TemporaryDirectory(prefix="ddph-launch-bench-") as tmp:
        seconds, done = timed([args.sim, "launch", "-n", str(world), "--timeout", "900", "--",
                               args.python, PROGRAM], dict(env, TMPDIR=tmp))
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    print("W = %d: launch (fork server) exit %d in %.1f s, PSS/rank %.1f MB: %s" % (
        world, done.returncode, seconds, pss_mean_mb(done.stdout), last[:200]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim", required=True, help="the ddp-sim binary")
    parser.add_argument("--python", default=sys.executable, help="the Python with torch")
    parser.add_argument("--worlds", default="8,32,128")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--exec-up-to", type=int, default=32,
                        help="the largest W also run with --exec (exec'd ranks are slow)")
    parser.add_argument("--largest", type=int, default=0, help="also try one launch at this W")
    args = parser.parse_args()
    env = dict(os.environ, DDPH_BENCH_PSS="1")
    print("cores: %d; %s" % (os.cpu_count(), args.python))
    for world in (int(w) for w in args.worlds.split(",")):
        measure(args, world, env)
    if args.largest:
        largest(args, env, args.largest)


if __name__ == "__main__":
    main()
