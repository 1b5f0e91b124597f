"""The CPU emulation's cost per training step, in one process: the same MNIST-sized step (MLP
784-128-10, batch 64, SGD, one torch thread) timed in alternating blocks with the emulation
instrumented and not (CudaOnCpuInstrumentor.instrument()/uninstrument() between blocks), so that
a shared machine's drift falls on both sides alike. Two loops: the CPU loop (a CPU program under
--cpu: only the wrappers' pass-through costs) and the GPU-style loop (.to(0) of every batch,
device="cuda" tensors) against the CPU loop bare (its hand port). Ratios of medians of per-block
step times; goals 1.03 and 1.05. No process group: what launch --cpu adds is per call, not per
collective (the collectives are gloo's either way). Then the cost of one wrapped call, which a
shared machine's noise does not hide: a pass-through (`x.to(torch.float32)`, `torch.zeros(1)`)
and a served one (`x.to(0)` against the hand port's `x.to("cpu")`), bare and emulated.

  python3 benchmarks/emulation_step_cost.py [--blocks 21] [--steps 200]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=21, help="blocks per side (default 21)")
    parser.add_argument("--steps", type=int, default=200, help="steps per block (default 200)")
    args = parser.parse_args()
    if args.blocks <= 0 or args.steps <= 0:
        print("emulation_step_cost.py: error: --blocks and --steps must be positive", file=sys.stderr)
        return 2
    import torch
    import torch.nn as nn
    from ddph_emulation.cuda_on_cpu import CudaOnCpuInstrumentor
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x, y = torch.randn(64 * 16, 784), torch.randint(0, 10, (64 * 16,))
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    def block(gpu_style):
        t0 = time.perf_counter()
        for s in range(args.steps):
            i = (s % 16) * 64
            inputs, targets = x[i:i + 64], y[i:i + 64]
            if gpu_style:
                inputs, targets = inputs.to(0, non_blocking=True), targets.to(0)
                torch.zeros(1, device="cuda")
            opt.zero_grad()
            loss_fn(model(inputs), targets).backward()
            opt.step()
        return (time.perf_counter() - t0) / args.steps

    emulation = CudaOnCpuInstrumentor(gpus=1)
    sides = {"bare": [], "cpu loop, emulated": [], "gpu-style loop, emulated": []}
    block(False)  # warm-up
    for b in range(args.blocks):
        order = list(sides)
        order = order[b % 3:] + order[:b % 3]  # rotate
        for side in order:
            if side == "bare":
                emulation.uninstrument()
            else:
                emulation.instrument()
            sides[side].append(block(side.startswith("gpu")))
    emulation.uninstrument()
    med = {k: statistics.median(v) for k, v in sides.items()}
    print(f"emulation cost per step, one process, torch {torch.__version__}, 1 thread, "
          f"{args.blocks} blocks of {args.steps} steps per side, medians of per-block step times")
    for k, v in med.items():
        print(f"  {k:26} {v * 1e6:9.1f} us/step  (ratio to bare {v / med['bare']:.4f})")
    print("goals: cpu loop emulated / bare <= 1.03; gpu-style loop emulated / bare <= 1.05")
    print("one call, median of 7 timings of 20000 calls (ns per call):")
    t = torch.ones(4)
    calls = (("x.to(torch.float32)", lambda: t.to(torch.float32), lambda: t.to(torch.float32)),
             ("torch.zeros(1)", lambda: torch.zeros(1), lambda: torch.zeros(1)),
             ('x.to(0) emulated vs x.to("cpu") bare', lambda: t.to("cpu"), lambda: t.to(0)))
    for name, bare_call, emulated_call in calls:
        bare_ns = per_call_ns(bare_call)
        emulation.instrument()
        emulated_ns = per_call_ns(emulated_call)
        emulation.uninstrument()
        print(f"  {name:38} bare {bare_ns:7.0f}   emulated {emulated_ns:7.0f}   "
              f"+{emulated_ns - bare_ns:.0f}")
    return 0


def per_call_ns(call, n=20000):
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        times.append((time.perf_counter() - t0) / n * 1e9)
    return statistics.median(times)


if __name__ == "__main__":
    sys.exit(main())
