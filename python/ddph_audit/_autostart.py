"""Entry of the auto-instrumentation (``_sitecustomize/sitecustomize.py``).

Records only when DDPH_AUDIT_DIR is set and this process was not started by an audited rank
(DDPH_AUDIT_RANK_PID set to another pid: a spawned DataLoader worker, a subprocess of the
program). Installs the post-import hooks only: torch is neither imported nor patched until the
program imports it."""

import os


def start():
    trace_dir = os.environ.get("DDPH_AUDIT_DIR")
    if not trace_dir:
        return False
    owner = os.environ.get("DDPH_AUDIT_RANK_PID")
    if owner and owner != str(os.getpid()):
        return False
    import ddph_audit
    ddph_audit.instrument(trace_dir)
    return True
