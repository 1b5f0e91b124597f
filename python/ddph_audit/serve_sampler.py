"""A Python ``Sampler`` class behind ddp-sim's line protocol, for ``ddp-sim check-sampler``.

    ddp-sim check-sampler -- python3 -m ddph_audit.serve_sampler my_sampler.py:ShardSampler
    ddp-sim check-sampler -- python3 -m ddph_audit.serve_sampler torch.utils.data:DistributedSampler

``SPEC`` is ``module:Class`` (an importable module, or a ``.py`` file's path). Every request line
``{"dataset_size":N,"num_replicas":W,"rank":R,"epoch":E,"seed":S}`` builds a fresh sampler the
way a DistributedSampler is built, ``Class(range(N), num_replicas=W, rank=R, seed=S, …)`` (only
the keywords its ``__init__`` takes; ``shuffle``/``drop_last`` from ``--no-shuffle``/``--drop-last``),
calls ``set_epoch(E)`` when it has one, and answers ``{"indices":[…],"length":len(sampler)}``.
A request the sampler rejects is answered with ``{"error":"…"}`` and serving goes on; the
checker decides what it means (docs/check-sampler.md). A spec that cannot be loaded is one line
on stderr and exit 2, before any request is read.
"""

import argparse
import importlib
import importlib.util
import inspect
import json
import os
import sys


def load_class(spec):
    """The class named by ``module:Class`` or ``path/to/file.py:Class``."""
    module_name, sep, class_name = spec.rpartition(":")
    if not sep or not module_name or not class_name:
        raise ValueError("%r is not module:Class" % spec)
    if module_name.endswith(".py"):
        if not os.path.isfile(module_name):
            raise ValueError("%s does not exist" % module_name)
        sys.path.insert(0, os.path.dirname(os.path.abspath(module_name)))
        loaded = importlib.util.spec_from_file_location(
            os.path.splitext(os.path.basename(module_name))[0], module_name)
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
    else:
        sys.path.insert(0, os.getcwd())
        module = importlib.import_module(module_name)
    cls = getattr(module, class_name, None)
    if not inspect.isclass(cls):
        raise ValueError("%s has no class %s" % (module_name, class_name))
    return cls


_AS_DISTRIBUTED = ("num_replicas", "rank", "seed", "shuffle", "drop_last")


def unbuildable(cls):
    """The parameters ``cls``'s constructor requires beyond DistributedSampler's (its first, the
    dataset, aside): a sampler that needs them cannot be built from a request; [] when none, or
    when its signature cannot be read."""
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return []
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in params if p.default is inspect.Parameter.empty
                and p.kind in positional + (inspect.Parameter.KEYWORD_ONLY,)]
    if required and required[0].kind in positional:
        required = required[1:]  # the dataset
    return [p.name for p in required if p.name not in _AS_DISTRIBUTED]


def build(cls, request, shuffle, drop_last):
    """``cls`` built for one request, as DistributedSampler is; set to the request's epoch."""
    wanted = {"num_replicas": request["num_replicas"], "rank": request["rank"],
              "seed": request["seed"], "shuffle": shuffle, "drop_last": drop_last}
    params = inspect.signature(cls).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in wanted.items() if takes_any or k in params}
    sampler = cls(range(request["dataset_size"]), **kwargs)
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(request["epoch"])
    return sampler


def serve(cls, lines, out, shuffle=True, drop_last=False):
    for line in lines:
        try:
            sampler = build(cls, json.loads(line), shuffle, drop_last)
            answer = {"indices": [int(i) for i in sampler], "length": len(sampler)}
        except Exception as e:  # the protocol's error answer
            answer = {"error": "%s: %s" % (type(e).__name__, e)}
        out.write(json.dumps(answer, separators=(",", ":")) + "\n")
        out.flush()  # one line per request, at once: the checker waits for it


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m ddph_audit.serve_sampler",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", help="module:Class or path/to/file.py:Class")
    parser.add_argument("--no-shuffle", action="store_true", help="build it with shuffle=False")
    parser.add_argument("--drop-last", action="store_true", help="build it with drop_last=True")
    args = parser.parse_args(argv)
    try:
        cls = load_class(args.spec)
    except Exception as e:
        print("serve_sampler: error: cannot load %s: %s" % (args.spec, e), file=sys.stderr)
        return 2
    missing = unbuildable(cls)
    if missing:
        print("serve_sampler: error: %s cannot be built as DistributedSampler is "
              "(dataset, num_replicas, rank, seed, shuffle, drop_last): its constructor also needs "
              "%s; serve it from your own code over the line protocol (docs/check-sampler.md)"
              % (cls.__name__, ", ".join(missing)), file=sys.stderr)
        return 2
    serve(cls, sys.stdin, sys.stdout, shuffle=not args.no_shuffle, drop_last=args.drop_last)
    return 0


if __name__ == "__main__":
    sys.exit(main())
