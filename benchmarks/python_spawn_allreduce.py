"""The Python peer of benchmarks/sim_scale.sh: W processes by torch.multiprocessing.spawn, each
init_process_group("gloo") on loopback, one all_reduce, a barrier. Prints the seconds it took."""
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    t = torch.ones(1)
    dist.all_reduce(t)
    assert int(t.item()) == world, t
    dist.barrier()
    dist.destroy_process_group()


def main():
    world = int(sys.argv[1])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.time()
    mp.spawn(worker, args=(world, port), nprocs=world, join=True)
    print(f"{time.time() - start:.2f}")


if __name__ == "__main__":
    main()
