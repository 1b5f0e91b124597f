"""The elastic sampler behind ddp-sim's line protocol:

    ddp-sim check-sampler --contract elastic -- python3 -m ddph_elastic [--drop-last] [--no-shuffle]

Each request {"dataset_size":N,"num_replicas":W,"rank":R,"epoch":E,"seed":S[,"resume":[...]]} is
answered with {"indices":[...],"length":n}: what rank R yields in the run after the earlier runs
listed in "resume" ({"num_replicas":W1,"consumed":c1}, oldest first), from a fresh sampler whose
state is loaded the way a resumed job loads it.
"""
import json
import sys

from .sampler import ElasticDistributedSampler


def answer(q, shuffle, drop_last):
    sampler = ElasticDistributedSampler(range(q["dataset_size"]), num_replicas=q["num_replicas"],
                                        rank=q["rank"], shuffle=shuffle, seed=q["seed"],
                                        drop_last=drop_last)
    sampler.set_epoch(q["epoch"])
    resume = q.get("resume", [])
    if resume:
        state = sampler.state_dict()
        state["history"] = [[p["num_replicas"], p["consumed"]] for p in resume[:-1]]
        state["num_replicas"] = resume[-1]["num_replicas"]
        state["consumed"] = resume[-1]["consumed"]
        sampler.load_state_dict(state)
    return {"indices": list(sampler), "length": len(sampler)}


def main() -> int:
    shuffle = "--no-shuffle" not in sys.argv[1:]
    drop_last = "--drop-last" in sys.argv[1:]
    for line in sys.stdin:
        try:
            reply = answer(json.loads(line), shuffle, drop_last)
        except Exception as e:  # the protocol's error answer; the checker decides what it means
            reply = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply, separators=(",", ":")) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
