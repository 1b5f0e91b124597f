"""python3 -m ddph_audit [--trace-dir DIR] [--cpu [--gpus N]] [--stand-in-data] script.py [args...]

Instruments this process (see ``ddph_audit``), then runs ``script.py`` as ``__main__`` with
``sys.argv = [script.py, args...]``, as ``python3 script.py args...`` would. The trace folder
defaults to $DDPH_AUDIT_DIR. ``--cpu`` (or DDPH_CPU=1) serves the CUDA face of torch from the
CPU (docs/cpu-emulation.md); with it the trace folder is optional. ``--stand-in-data`` (or
DDPH_STAND_IN_DATA=1) serves torchvision's MNIST and CIFAR offline. For torchrun:
    torchrun --nproc-per-node 4 -m ddph_audit --trace-dir /shared/trace train.py
    torchrun --nproc-per-node 4 -m ddph_audit --cpu --trace-dir /shared/trace gpu_train.py
"""

import argparse
import os
import re
import runpy
import sys

import ddph_audit
from ddph_audit import environment

USAGE = ("usage: python3 -m ddph_audit [--trace-dir DIR] [--cpu [--gpus N]] [--stand-in-data] "
         "script.py [args...]")
_VALUED = ("--trace-dir", "--gpus")  # the options that take a value
_FLAGS = ("--cpu", "--stand-in-data", "-h", "--help")
_NEEDS_VALUE = re.compile(r"argument (--[a-z-]+): expected one argument")


class _BadArguments(Exception):
    pass


class _Help(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """Its errors are raised, to be said in this tool's one line (main)."""

    def error(self, message):
        valued = _NEEDS_VALUE.match(message)
        raise _BadArguments("%s needs a value" % valued.group(1) if valued else message)


class _HelpAction(argparse.Action):
    """-h where it stands: an error of an option before it is said instead."""

    def __call__(self, parser, namespace, values, option_string=None):
        raise _Help()


def _gpus(value):
    try:
        gpus = int(value)
    except ValueError:
        gpus = 0
    if not 0 < gpus <= 4096:
        raise _BadArguments("--gpus %s is not between 1 and 4096" % value)
    return gpus


def _parser():
    parser = _Parser(prog="python3 -m ddph_audit", add_help=False, allow_abbrev=False)
    parser.add_argument("--trace-dir")
    parser.add_argument("--gpus", type=_gpus)
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--stand-in-data", action="store_true")
    parser.add_argument("-h", "--help", action=_HelpAction, nargs=0)
    return parser


def _split(argv):
    """(this tool's options, the program's command line). The command line starts after "--", or
    at the first argument that is neither an option of ours nor its value (another option too,
    as a script's name would); "--opt VALUE" comes back as "--opt=VALUE" (a value may begin with
    "-")."""
    options, i = [], 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return options, argv[i + 1:]
        if arg in _VALUED and i + 1 < len(argv):
            options.append("%s=%s" % (arg, argv[i + 1]))
            i += 2
        elif arg in _FLAGS or arg in _VALUED or arg.partition("=")[0] in _VALUED:
            options.append(arg)
            i += 1
        else:
            break
    return options, argv[i:]


def _parse(argv):
    """(options, [script, args...], None), or (None, None, the error: "help" for -h)."""
    options, rest = _split(argv)
    try:
        opts = _parser().parse_args(options)
    except _Help:
        return None, None, "help"
    except _BadArguments as e:
        return None, None, str(e)
    if not rest:
        return None, None, "no script given"
    if opts.gpus is not None and not opts.cpu:
        return None, None, "--gpus needs --cpu"
    return opts, rest, None


def _start_emulation(opts):
    """--cpu / --stand-in-data, or DDPH_CPU=1 / DDPH_STAND_IN_DATA=1 inherited: in this process
    (the registry's entries those switches turn on) and, through the environment, in every
    process it starts, spawned ranks included."""
    if opts.cpu:
        os.environ[environment.CPU] = "1"
        if opts.gpus is not None:
            os.environ[environment.CPU_GPUS] = str(opts.gpus)
    if opts.stand_in_data:
        os.environ[environment.STAND_IN_DATA] = "1"
    ddph_audit.install_from_environment((environment.CPU, environment.STAND_IN_DATA))


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
        sys.stderr.write("ddph_audit: no trace folder: pass --trace-dir DIR or set %s\n"
                         % environment.AUDIT_DIR)
        return 2
    script = rest[0]
    if not os.path.isfile(script):
        sys.stderr.write("ddph_audit: can't open file '%s'\n" % script)
        return 2
    sys.argv = list(rest)
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    _inherit_instrumentation()
    if trace_dir:
        # Spawned ranks (torch.multiprocessing.spawn) find the recorder through the environment.
        os.environ[environment.AUDIT_DIR] = os.path.abspath(trace_dir)
        ddph_audit.instrument(trace_dir)
    _start_emulation(opts)
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        ddph_audit.note_exit_code(e.code)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
