"""What the audit recorder costs per DDP step, measured in one process (W = 1, gloo on 127.0.0.1).

Runs the DDP step of audit_overhead.py's loop (MLP 784-128-10, batch 64, SGD; no DataLoader, so
no `batch` lines) in blocks of --steps, switching between configurations between blocks (order
alternating) so that drift on a shared machine hits them alike, and prints each one's median and
minimum time per step and its difference to `off`:

  off        the recorder installed but inactive (what a bare run costs, plus one `if` per call)
  on         recording: a `forward` line, the buckets' `coll` and `coll_done` lines per step
  no-write   recording, every line formatted but not written (the cost of write(2))
  no-watch   recording, but DDP's backward not watched (the cost of the bucket callbacks)

  DDPH_BLAS_DIR=$(scripts/fetch-openblas.sh) benchmarks/run_audit_step_cost.sh [--blocks 10]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=10, help="blocks per configuration")
    parser.add_argument("--steps", type=int, default=500, help="steps per block")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ddph-step-cost-") as trace:
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1")
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])
        import ddph_audit
        ddph_audit.instrument(trace)
        import torch
        import torch.distributed as dist
        import torch.nn as nn
        from ddph_audit import ddp_backward_watch, recorder

        torch.set_num_threads(1)
        dist.init_process_group("gloo")
        torch.manual_seed(0)
        model = nn.parallel.DistributedDataParallel(
            nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        loss_fn = nn.CrossEntropyLoss()
        x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))

        writer = recorder.state.writer
        put, watch = writer._put, ddp_backward_watch.watch

        def configure(name):
            recorder.state.active = name != "off"
            writer._put = (lambda text: None) if name == "no-write" else put
            ddp_backward_watch.watch = (lambda *a, **k: None) if name == "no-watch" else watch

        def block(n):
            start = time.perf_counter()
            for _ in range(n):
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
            return (time.perf_counter() - start) / n * 1e6

        names = ["off", "on", "no-write", "no-watch"]
        times = {name: [] for name in names}
        for name in names:  # warm-up
            configure(name)
            block(50)
        for b in range(args.blocks):
            for name in (names if b % 2 == 0 else names[::-1]):
                configure(name)
                times[name].append(block(args.steps))
        configure("off")
        writer._put = put
        del model
        dist.destroy_process_group()
        ddph_audit.uninstrument()

    off = statistics.median(times["off"])
    print("audit recorder per DDP step, one process, W = 1, %d blocks of %d steps "
          "(torch %s)" % (args.blocks, args.steps, torch.__version__))
    for name in names:
        med = statistics.median(times[name])
        print("  %-9s median %7.1f us  min %7.1f us  vs off %+6.1f us (%.3f)"
              % (name, med, min(times[name]), med - off, med / off))
    return 0


if __name__ == "__main__":
    sys.exit(main())
