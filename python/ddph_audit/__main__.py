"""python3 -m ddph_audit [--trace-dir DIR] [--cpu [--gpus N]] [--stand-in-data] script.py [args...]

Instruments this process (see ``ddph_audit``), then runs ``script.py`` as ``__main__`` with
``sys.argv = [script.py, args...]``, as ``python3 script.py args...`` would. The trace folder
defaults to $DDPH_AUDIT_DIR. ``--cpu`` (or DDPH_CPU=1) serves the CUDA face of torch from the
CPU (docs/cpu-emulation.md); with it the trace folder is optional. ``--stand-in-data`` (or
DDPH_STAND_IN_DATA=1) serves torchvision's MNIST and CIFAR offline. For torchrun:
    torchrun --nproc-per-node 4 -m ddph_audit --trace-dir /shared/trace train.py
    torchrun --nproc-per-node 4 -m ddph_audit --cpu --trace-dir /shared/trace gpu_train.py
"""

import os
import runpy
import sys

from ddph_audit import environment

USAGE = ("usage: python3 -m ddph_audit [--trace-dir DIR] [--cpu [--gpus N]] [--stand-in-data] "
         "script.py [args...]")


class _Options:
    trace_dir = None
    cpu = False
    gpus = None
    stand_in_data = False


def _parse(argv):
    opts = _Options()
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--trace-dir", "--gpus"):
            if i + 1 >= len(argv):
                return None, None, "%s needs a value" % a
            value = argv[i + 1]
            i += 2
        elif a.startswith("--trace-dir=") or a.startswith("--gpus="):
            a, value = a.split("=", 1)
            i += 1
        elif a in ("--cpu", "--stand-in-data"):
            opts.cpu = opts.cpu or a == "--cpu"
            opts.stand_in_data = opts.stand_in_data or a == "--stand-in-data"
            i += 1
            continue
        elif a in ("-h", "--help"):
            return None, None, "help"
        elif a == "--":
            i += 1
            break
        else:
            break
        if a == "--trace-dir":
            opts.trace_dir = value
        else:
            try:
                opts.gpus = int(value)
            except ValueError:
                opts.gpus = 0
            if not 0 < opts.gpus <= 4096:
                return None, None, "--gpus %s is not between 1 and 4096" % value
    rest = argv[i:]
    if not rest:
        return None, None, "no script given"
    if opts.gpus is not None and not opts.cpu:
        return None, None, "--gpus needs --cpu"
    return opts, rest, None


def _start_emulation(opts):
    """--cpu / --stand-in-data, or DDPH_CPU=1 / DDPH_STAND_IN_DATA=1 inherited: in this process
    and (through the environment) in every process it starts, spawned ranks included."""
    from ddph_emulation import cuda_on_cpu
    if opts.cpu:
        os.environ[environment.CPU] = "1"
        if opts.gpus is not None:
            os.environ[environment.CPU_GPUS] = str(opts.gpus)
    from ddph_emulation import stand_in_data
    if opts.stand_in_data:
        os.environ[environment.STAND_IN_DATA] = "1"
    if stand_in_data.enabled_by_environment():
        stand_in_data.instrument_when_torchvision_is_imported()
    if cuda_on_cpu.enabled_by_environment():
        cuda_on_cpu.instrument_when_torch_is_imported()


def _inherit_instrumentation():
    """Puts the auto-instrumentation on PYTHONPATH, so that the Python processes the program
    starts (torch.multiprocessing.spawn's ranks) load it as ``ddp-sim launch``'s ranks do."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    site = os.path.join(package, "ddph_audit", "_sitecustomize")
    entries = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    head = [p for p in (site, package) if p not in entries]
    os.environ["PYTHONPATH"] = os.pathsep.join(head + entries)


def main():
    opts, rest, err = _parse(sys.argv[1:])
    if err == "help":
        print(USAGE)
        print(__doc__.split("\n\n", 1)[1].rstrip())
        return 0
    if err is not None:
        sys.stderr.write("ddph_audit: %s; %s\n" % (err, USAGE))
        return 2
    trace_dir = opts.trace_dir or os.environ.get(environment.AUDIT_DIR)
    emulating = opts.cpu or opts.stand_in_data or any(
        environment.is_on(name) for name in (environment.CPU, environment.STAND_IN_DATA))
    if not trace_dir and not emulating:
        sys.stderr.write("ddph_audit: no trace folder: pass --trace-dir DIR or set DDPH_AUDIT_DIR\n")
        return 2
    script = rest[0]
    if not os.path.isfile(script):
        sys.stderr.write("ddph_audit: can't open file '%s'\n" % script)
        return 2
    sys.argv = list(rest)
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    import ddph_audit
    _inherit_instrumentation()
    if trace_dir:
        # Spawned ranks (torch.multiprocessing.spawn) find the recorder through the environment.
        os.environ[environment.AUDIT_DIR] = os.path.abspath(trace_dir)
        ddph_audit.instrument(trace_dir)
    _start_emulation(opts)
    from ddph_audit import process_hooks
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        process_hooks.note_exit_code(e.code)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
