"""Entry of the auto-instrumentation (``_sitecustomize/sitecustomize.py``).

Records only when DDPH_AUDIT_DIR is set and this process was not started by an audited rank
(DDPH_AUDIT_RANK_PID set to another pid: a spawned DataLoader worker, a subprocess of the
program), unless an audited spawner started it (``torch.multiprocessing.spawn``: a rank of its
own, spawned_ranks.py). Installs the post-import hooks only: torch is neither imported nor
patched until the program imports it."""

import os

from . import environment


def started_by_spawner():
    """True in a child that an audited spawner started (a rank of its own)."""
    return os.environ.get(environment.AUDIT_SPAWNER, "") == str(os.getppid())


def start():
    trace_dir = os.environ.get(environment.AUDIT_DIR)
    if not trace_dir:
        return False
    spawned = started_by_spawner()
    owner = os.environ.get(environment.AUDIT_RANK_PID)
    if owner and owner != str(os.getpid()) and not spawned:
        return False
    import ddph_audit
    ddph_audit.instrument(trace_dir, spawned_rank=spawned)
    return True
