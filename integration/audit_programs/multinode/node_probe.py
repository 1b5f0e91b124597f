"""What a rank of an emulated node sees (integration/launch_test.cpp, MultiNode.*): one JSON line
with its torchrun and SLURM variables, host names (socket, platform, os.uname), the addresses its
Gloo sockets are bound to (with --gloo: init_process_group("gloo") and an all_reduce) and, with --cuda,
torch.cuda's device_count and whether set_device(k) works for k = 0..count."""
import json
import os
import platform
import socket
import sys

NAMES = ["RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "NODE_RANK", "LOCAL_WORLD_SIZE",
         "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "SLURM_PROCID",
         "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_NNODES",
         "SLURM_JOB_NODELIST", "SLURMD_NODENAME", "SLURM_JOB_ID"]

def own_bound_addresses():
    """The 127.1.x.y addresses this process's own TCP sockets are bound to (its Gloo pairs')."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    with open("/proc/net/tcp") as f:
        for line in f.read().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:  # ours, listening or connected
                addr = fields[1].split(":")[0]
                dotted = ".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0))
                if dotted.startswith("127.1."):
                    found.add(dotted)
    return found


seen = {"env": {n: os.environ.get(n) for n in NAMES},
        "hostname": socket.gethostname(), "platform_node": platform.node(),
        "uname_nodename": os.uname().nodename}
if "--gloo" in sys.argv:
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.ones(1)
    dist.all_reduce(t)
    seen["sum"] = int(t.item())
    seen["bound"] = sorted(own_bound_addresses())
    dist.destroy_process_group()
if "--cuda" in sys.argv:
    import torch
    seen["device_count"] = torch.cuda.device_count()
    ok = []
    for k in range(torch.cuda.device_count() + 1):
        try:
            torch.cuda.set_device(k)
            ok.append(True)
        except RuntimeError:
            ok.append(False)
    seen["set_device"] = ok
print("PROBE " + json.dumps(seen, sort_keys=True), flush=True)
