"""What the audit recorder costs per DDP step, measured in one process (W = 1, gloo on 127.0.0.1).

Runs the step of audit_overhead.py's loop (a DataLoader with a DistributedSampler over 60,000
MNIST-sized random samples, batch 64, MLP 784-128-10 in DDP, SGD) in blocks of --steps, switching
between configurations between blocks (order alternating) so that drift on a shared machine hits
them alike, and prints each one's median and lower quartile of the time per step and their difference to `off`:

  off        the recorder installed but inactive (what a bare run costs, plus one `if` per call)
  on         recording: per step a `batch` and a `forward` line, the buckets' `coll` and `coll_done`
  no-write   recording, every line formatted but not stored in the file
  no-emit    recording, no line even formatted (what the wrappers and the backward watch cost)
  no-watch   recording, but DDP's backward not watched (the cost of the bucket callbacks)

  DDPH_BLAS_DIR=$(scripts/fetch-openblas.sh) benchmarks/run_audit_step_cost.sh [--blocks 40]
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
    parser.add_argument("--blocks", type=int, default=40, help="blocks per configuration")
    parser.add_argument("--steps", type=int, default=100, help="steps per block")
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
        from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
        from ddph_audit import ddp_backward_watch

        torch.set_num_threads(1)
        dist.init_process_group("gloo")
        torch.manual_seed(0)
        model = nn.parallel.DistributedDataParallel(
            nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        loss_fn = nn.CrossEntropyLoss()
        data = TensorDataset(torch.randn(60000, 784), torch.randint(0, 10, (60000,)))
        sampler = DistributedSampler(data, num_replicas=1, rank=0, seed=0)
        loader = DataLoader(data, batch_size=64, sampler=sampler)
        batches = iter(())
        epoch = 0

        def next_batch():
            nonlocal batches, epoch
            try:
                return next(batches)
            except StopIteration:
                sampler.set_epoch(epoch)
                epoch += 1
                batches = iter(loader)
                return next(batches)

        recorder = ddph_audit.session().recorder
        writer = recorder.writer
        store, watch = writer._store, ddp_backward_watch.watch
        emits = {name: getattr(recorder, name)
                 for name in ("emit", "emit_many", "emit_line", "emit_lines")}

        def configure(name):
            recorder.active = name != "off"
            writer._store = (lambda data: None) if name == "no-write" else store
            for fn, real in emits.items():
                setattr(recorder, fn, (lambda *a, **k: None) if name == "no-emit" else real)
            ddp_backward_watch.watch = (lambda *a, **k: None) if name == "no-watch" else watch

        def block(n):
            start = time.perf_counter()
            for _ in range(n):
                x, y = next_batch()
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
            return (time.perf_counter() - start) / n * 1e6

        names = ["off", "on", "no-write", "no-emit", "no-watch"]
        times = {name: [] for name in names}
        for name in names:  # warm-up
            configure(name)
            block(50)
        for b in range(args.blocks):
            for name in (names if b % 2 == 0 else names[::-1]):
                configure(name)
                times[name].append(block(args.steps))
        configure("on")
        recorder.active = False
        del model, batches
        dist.destroy_process_group()
        ddph_audit.uninstrument()

    def quartile(v):  # the lower quartile: less sensitive than the median to a noisy neighbour
        return statistics.quantiles(v, n=4)[0]

    off_med, off_q1 = statistics.median(times["off"]), quartile(times["off"])
    print("audit recorder per DDP step, one process, W = 1, %d blocks of %d steps "
          "(torch %s)" % (args.blocks, args.steps, torch.__version__))
    for name in names:
        med, q1 = statistics.median(times[name]), quartile(times[name])
        print("  %-9s median %7.1f us (vs off %+6.1f)  lower quartile %7.1f us (vs off %+6.1f, %.3f)"
              % (name, med, med - off_med, q1, q1 - off_q1, q1 / off_q1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
