"""How far an emulated multi-node world goes on this machine, and where its time goes: `ddp-sim
launch --nnodes N -n M` of one small healthy DDP program (benchmarks/launch_program.py), each run
split into the program's phases, beside the peer measured in the same run: the hand-made recipe
of two torchrun agents on loopback (--nnodes 2 --node_rank 0/1) at W = 8. A benchmark, not a
test: figures, no pass or fail.

    python3 benchmarks/multi_node_scale.py --sim build/bin/ddp-sim [--worlds 2x4,32x8,64x8]
                                           [--audit] [--deadline 600]

Per world it prints the wall time (and its ratio to the peer's) and, from the first and the last rank's clocks, when the ranks
had started and how long each phase took: joining the process group (torch's Gloo rendezvous:
every rank connects a pair to every other), building DDP (its first broadcast and checks),
training (2 epochs, 4 DDP steps at W >= 256, rank 0 evaluating), destroying the group, and the
exit. A run past --deadline is ended and shows the last phase it reached. docs/multi-node.md,
"How far it goes".
"""
import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "launch_program.py")
PHASES = ["started", "joined", "ddp", "trained", "destroyed"]
PHASE_LINE = re.compile(r"phase (\w+) ([0-9.]+)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_all(argvs, env, deadline):
    """Runs the commands side by side, each in its own session; returns (seconds, exit codes,
    output); at the deadline every one is ended with its children."""
    start = time.time()
    procs = [subprocess.Popen(a, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, start_new_session=True) for a in argvs]
    outputs, codes = [], []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - (time.time() - start)))
        except subprocess.TimeoutExpired:
            for q in procs:
                try:
                    os.killpg(q.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            out, _ = p.communicate()
        outputs.append(out)
        codes.append(p.returncode)
    return start, time.time() - start, codes, "".join(outputs)


def phases(output, start):
    """phase -> seconds from the start, the later of the two ranks that print it."""
    seen = {}
    for name, stamp in PHASE_LINE.findall(output):
        seen[name] = max(seen.get(name, 0.0), float(stamp) - start)
    return seen


def report(label, world, start, seconds, codes, output, peer):
    seen = phases(output, start)
    cells, previous = [], None
    for name in PHASES:
        if name not in seen:
            cells.append("%s -" % name)
            continue
        took = seen[name] if previous is None else seen[name] - previous
        cells.append("%s %.1f" % (name, took))
        previous = seen[name]
    exit_s = seconds - previous if previous is not None else seconds
    verdict = "exit %s" % ",".join(str(c) for c in sorted(set(codes)))
    if "): PASSED" in output:
        verdict += ", PASSED"
    print("W = %4d %-26s %7.1f s %7.2fx peer  %-16s | %s | exit %.1f" % (
        world, label, seconds, seconds / peer, verdict, "  ".join(cells), exit_s))
    if any(codes):
        lines = output.strip().splitlines()
        print("         last line: %s" % (lines[-1][:200] if lines else "(none)"))
    sys.stdout.flush()


def torchrun_pair(python, per_node):
    """The peer: two torchrun agents on loopback, as docs/multi-node.md describes."""
    port = free_port()
    return [[python, "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", str(node),
             "--nproc_per_node", str(per_node), "--rdzv_backend", "c10d",
             "--rdzv_endpoint", "127.0.0.1:%d" % port, "--rdzv_id", "bench%d" % port,
             "--redirects", "9:0", "--tee", "9:0", PROGRAM] for node in (0, 1)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim", required=True, help="the ddp-sim binary")
    parser.add_argument("--python", default=sys.executable, help="the Python with torch")
    parser.add_argument("--worlds", default="2x4,32x8,64x8", help="NODESxRANKS_PER_NODE, ...")
    parser.add_argument("--audit", action="store_true", help="launch with --audit")
    parser.add_argument("--deadline", type=float, default=900, help="seconds a run may take")
    args = parser.parse_args()
    print("cores: %d; %s" % (os.cpu_count(), args.python))
    with tempfile.TemporaryDirectory(prefix="ddph-nodes-bench-") as tmp:
        env = dict(os.environ, DDPH_BENCH_PHASES="1", TMPDIR=tmp)
        start, seconds, codes, out = run_all(torchrun_pair(args.python, 4), env, args.deadline)
        peer = seconds
        report("2 torchrun agents x 4", 8, start, seconds, codes, out, peer)
        for shape in args.worlds.split(","):
            nodes, per_node = (int(v) for v in shape.split("x"))
            argv = [args.sim, "launch", "--nnodes", str(nodes), "-n", str(per_node),
                    "--timeout", str(int(args.deadline))]
            argv += ["--audit"] if args.audit else []
            start, seconds, codes, out = run_all([argv + ["--", args.python, PROGRAM]], env,
                                                 args.deadline + 60)
            report("launch --nnodes %d -n %d" % (nodes, per_node), nodes * per_node, start,
                   seconds, codes, out, peer)


if __name__ == "__main__":
    main()
