"""``ddp-sim audit`` on a distributed test's trace: where the tool is, and what it found.

The tool is ``$DDPH_SIM`` when set, else ``ddp-sim`` on PATH. Its exit code is the verdict (0 no
finding, 1 findings, 2 a trace it cannot read: docs/audit.md); its text report's findings and
notes are kept, without its first line (the program, here pytest's own command line) and without
the inventory of what it saw.
"""

import os
import shutil
import subprocess

from ddph_audit import environment

AUDIT_TIMEOUT_S = 120
NOT_FOUND = ("ddph: ddp-sim not found on PATH: put the folder holding it on PATH (ddp-harness's "
             "build/bin), or set DDPH_SIM=/path/to/ddp-sim, or run without the audit "
             "(--ddph-no-audit)")


def find_ddp_sim():
    """The ddp-sim executable's path, or None."""
    explicit = os.environ.get(environment.SIM)
    if explicit:
        return explicit if os.path.isfile(explicit) and os.access(explicit, os.X_OK) else None
    return shutil.which("ddp-sim")


class AuditResult:
    """``passed``; ``blocks``: each finding (its FAIL line and the lines under it) and each note,
    as the audit printed them; ``error``: the one line of an audit that could not judge."""

    def __init__(self, passed, blocks, error=None):
        self.passed = passed
        self.blocks = blocks
        self.error = error

    def findings(self, without=()):
        """The blocks, less the findings of the properties in ``without``."""
        return [b for b in self.blocks
                if not any(b.startswith("FAIL %s" % p) for p in without)]


def _blocks(text):
    """The report's findings and notes, each a block of lines (its first line unindented)."""
    blocks = []
    for line in text.splitlines()[1:]:
        if line.startswith("  seen on rank"):
            break
        if line.startswith("  FAIL ") or line.startswith("  note: "):
            blocks.append(line[2:])
        elif line.strip() and blocks:
            blocks[-1] += "\n" + line[2:]
    return blocks


def audit(ddp_sim, trace_dir):
    try:
        done = subprocess.run([ddp_sim, "audit", trace_dir], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=AUDIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return AuditResult(False, [], "ddp-sim audit did not finish in %d s" % AUDIT_TIMEOUT_S)
    except OSError as e:
        return AuditResult(False, [], "cannot run %s: %s" % (ddp_sim, e))
    if done.returncode not in (0, 1):
        lines = (done.stderr or done.stdout).strip().splitlines()
        return AuditResult(False, [], lines[-1] if lines else "ddp-sim audit exited with code %d"
                           % done.returncode)
    return AuditResult(done.returncode == 0, _blocks(done.stdout))
