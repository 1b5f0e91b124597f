"""``ddp-sim audit`` on a distributed test's trace: where the tool is, and what it found.

The tool is ``$DDPH_SIM`` when set, else ``ddp-sim`` on PATH. Its exit code is the verdict (0 no
finding, 1 findings, 2 a trace it cannot read: docs/audit.md); what it found is read from its JSON
report (``--report``: the ``violations`` and ``notes`` of docs/audit.md's report), each finding
and each note written as the audit's own text writes them ("FAIL reshuffle at epoch 0: …", its
likely cause under it, "note: …"), without the program's line (here pytest's own command line) or
the inventory of what it saw.
"""

import json
import os
import shutil
import subprocess

from ddph_audit import environment

AUDIT_TIMEOUT_S = 120
SHOWN = 12  # findings shown, as the audit's text shows them; the rest counted
NOT_FOUND = ("ddph: ddp-sim not found on PATH: put the folder holding it on PATH (ddp-harness's "
             "build/bin), or set %s=/path/to/ddp-sim, or run without the audit "
             "(--ddph-no-audit)" % environment.SIM)


def find_ddp_sim():
    """The ddp-sim executable's path, or None."""
    explicit = os.environ.get(environment.SIM)
    if explicit:
        return explicit if os.path.isfile(explicit) and os.access(explicit, os.X_OK) else None
    return shutil.which("ddp-sim")


class AuditResult:
    """``passed``; ``blocks``: (property or None for a note, its text) of each finding (its FAIL
    line and the lines under it) and each note; ``error``: the one line of an audit that could not
    judge."""

    def __init__(self, passed, blocks, error=None):
        self.passed = passed
        self.blocks = blocks
        self.error = error

    def findings(self, without=()):
        """The blocks' texts, less the findings of the properties in ``without``."""
        return [text for prop, text in self.blocks if prop is None or prop not in without]


def finding_text(violation):
    """"reshuffle at epoch 0 on rank 1: …": a violation's line, as the audit writes it
    (ddph::sampler::formatViolation)."""
    where = ""
    if violation.get("epoch", -1) >= 0:
        where += " at epoch %d" % violation["epoch"]
    if violation.get("step", -1) >= 0:
        where += " step %d" % violation["step"]
    ranks = violation.get("ranks") or []
    if ranks:
        where += " on rank%s %s" % ("" if len(ranks) == 1 else "s", ", ".join(map(str, ranks)))
    return "%s%s: %s" % (violation["property"], where, violation.get("detail", ""))


def report_blocks(report):
    """The report's findings and notes as blocks, each finding's likely cause, notes and help
    under it (the report does not say which cause is the finding's own, which the text shows
    every time, and which the catalogue's, shown once per property: each is shown)."""
    blocks = []
    violations = report.get("violations", [])
    for v in violations[:SHOWN]:
        text = "FAIL " + finding_text(v)
        if v.get("likely_cause"):
            text += "\n     likely cause: " + v["likely_cause"]
        for note in v.get("notes", []):
            text += "\n     note: " + note
        if v.get("help"):
            text += "\n     help: " + v["help"]
        blocks.append((v["property"], text))
    if len(violations) > SHOWN:
        prop, text = blocks[-1]
        blocks[-1] = (prop, text + "\n… %d more violations" % (len(violations) - SHOWN))
    blocks += [(None, "note: " + note) for note in report.get("notes", [])]
    return blocks


def audit(ddp_sim, trace_dir, report_path):
    try:
        done = subprocess.run([ddp_sim, "audit", trace_dir, "--report", report_path, "--quiet"],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=AUDIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return AuditResult(False, [], "ddp-sim audit did not finish in %d s" % AUDIT_TIMEOUT_S)
    except OSError as e:
        return AuditResult(False, [], "cannot run %s: %s" % (ddp_sim, e))
    if done.returncode not in (0, 1):
        lines = (done.stderr or done.stdout).strip().splitlines()
        return AuditResult(False, [], lines[-1] if lines else "ddp-sim audit exited with code %d"
                           % done.returncode)
    try:
        with open(report_path, encoding="utf-8") as f:
            report = json.load(f)
        blocks = report_blocks(report)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return AuditResult(False, [], "cannot read the audit's report %s: %s" % (report_path, e))
    return AuditResult(done.returncode == 0, blocks)
