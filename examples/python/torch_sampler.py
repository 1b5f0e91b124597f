#!/usr/bin/env python3
"""torch's own DistributedSampler behind the ddp-sim line protocol.

Check it with:   ddp-sim check-sampler --contract pytorch -- /usr/bin/python3 torch_sampler.py

Every request line {"dataset_size":N,"num_replicas":W,"rank":R,"epoch":E,"seed":S} is answered
with {"indices":[...],"length":len(sampler)} computed by a fresh
torch.utils.data.DistributedSampler(range(N), num_replicas=W, rank=R, seed=S) after
set_epoch(E) -- the real sampler, nothing cached between requests. Pass --drop-last or
--no-shuffle to build it with drop_last=True / shuffle=False (check those with
--contract drop-last / --no-shuffle). A request the sampler rejects is answered with
{"error": "..."} and the adapter keeps serving.
"""
import json
import sys

from torch.utils.data import DistributedSampler


def main() -> int:
    drop_last = "--drop-last" in sys.argv[1:]
    shuffle = "--no-shuffle" not in sys.argv[1:]
    out = sys.stdout
    for line in sys.stdin:
        try:
            q = json.loads(line)
            sampler = DistributedSampler(range(q["dataset_size"]), num_replicas=q["num_replicas"],
                                         rank=q["rank"], shuffle=shuffle, seed=q["seed"],
                                         drop_last=drop_last)
            sampler.set_epoch(q["epoch"])
            answer = {"indices": list(sampler), "length": len(sampler)}
        except Exception as e:  # the protocol's error answer; the checker decides what it means
            answer = {"error": f"{type(e).__name__}: {e}"}
        # One line per request, flushed at once: the checker waits for it.
        out.write(json.dumps(answer, separators=(",", ":")) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
