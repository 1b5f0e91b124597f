"""python3 -m ddph_audit [--trace-dir DIR] script.py [args...]

Instruments this process (see ``ddph_audit``), then runs ``script.py`` as ``__main__`` with
``sys.argv = [script.py, args...]``, as ``python3 script.py args...`` would. The trace folder
defaults to $DDPH_AUDIT_DIR. For torchrun:
    torchrun --nproc-per-node 4 -m ddph_audit --trace-dir /shared/trace train.py
"""

import os
import runpy
import sys

USAGE = "usage: python3 -m ddph_audit [--trace-dir DIR] script.py [args...]"


def _parse(argv):
    trace_dir = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--trace-dir":
            if i + 1 >= len(argv):
                return None, None, "--trace-dir needs a value"
            trace_dir = argv[i + 1]
            i += 2
        elif a.startswith("--trace-dir="):
            trace_dir = a.split("=", 1)[1]
            i += 1
        elif a in ("-h", "--help"):
            return None, None, "help"
        elif a == "--":
            i += 1
            break
        else:
            break
    rest = argv[i:]
    if not rest:
        return None, None, "no script given"
    return trace_dir, rest, None


def main():
    trace_dir, rest, err = _parse(sys.argv[1:])
    if err == "help":
        print(USAGE)
        print(__doc__.split("\n\n", 1)[1].rstrip())
        return 0
    if err is not None:
        sys.stderr.write("ddph_audit: %s; %s\n" % (err, USAGE))
        return 2
    trace_dir = trace_dir or os.environ.get("DDPH_AUDIT_DIR")
    if not trace_dir:
        sys.stderr.write("ddph_audit: no trace folder: pass --trace-dir DIR or set DDPH_AUDIT_DIR\n")
        return 2
    script = rest[0]
    if not os.path.isfile(script):
        sys.stderr.write("ddph_audit: can't open file '%s'\n" % script)
        return 2
    sys.argv = list(rest)
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    import ddph_audit
    ddph_audit.instrument(trace_dir)
    from ddph_audit import process_hooks
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        process_hooks.note_exit_code(e.code)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
