"""A distributed test's verdict and its text, from how each rank ended and what the audit found.

The first line is the cause, as pytest's short summary shows it: the failing rank and its error
("rank 2: AssertionError: assert 1.0 == 6"), the timeout, or the audit's first finding. Below it,
each failing rank's own pytest traceback (ranks that failed alike once), the ranks stopped because
of it and where they stood, and the audit's findings. A rank's error is the primary finding:
the audit's ``rank-failure`` for that rank says the same and is left out.
"""

import signal

from . import stacks


class Verdict:
    """``outcome``: "passed", "skipped" or "failed"; ``text``: the reason or the failure."""

    def __init__(self, outcome, text=""):
        self.outcome = outcome
        self.text = text


def rank_list(ranks):
    ranks = sorted(ranks)
    return ("rank %d" % ranks[0]) if len(ranks) == 1 else \
        "ranks " + ", ".join(str(r) for r in ranks)


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return "signal %d" % number


def _failure_groups(ranks):
    """[(headline, [ranks], text of the first)] of the ranks whose body failed, first failed
    phase each, grouped by their error's headline."""
    groups = {}
    for r in ranks:
        if r.result is None or not r.result["failures"]:
            continue
        first = r.result["failures"][0]
        headline = first["headline"]
        if first["when"] != "call":
            headline = "error in %s: %s" % (first["when"], headline)
        groups.setdefault(headline, ([], first["text"]))[0].append(r.rank)
    return [(h, rs, text) for h, (rs, text) in groups.items()]


def _ended_without_result(r):
    if r.start_error:
        return "%s could not start: %s" % (rank_list([r.rank]), r.start_error)
    if r.outcome == "signaled":
        return "%s was killed by %s" % (rank_list([r.rank]), _signal_name(r.signal))
    return "%s exited with code %d before reporting its result" % (rank_list([r.rank]), r.code)


def _stood_lines(spec, ranks, only_program_frames):
    lines = []
    for r in ranks:
        at = stacks.stood_at(spec.stack_path(r.rank))
        if at is not None:
            lines.append("  rank %d stood at %s" % (r.rank, at))
        elif not only_program_frames:
            lines.append("  rank %d: no frame of the test's code in its stack" % r.rank)
    return lines


def _rank_sections(spec, outcome):
    """(headlines, body lines) for the ranks that failed, died or hung."""
    ranks = outcome.ranks
    heads, body = [], []
    for headline, failed, text in _failure_groups(ranks):
        heads.append("%s: %s" % (rank_list(failed), headline))
        title = rank_list(failed[:1]) + (" (the same on %s)" % rank_list(failed[1:])
                                         if len(failed) > 1 else "")
        body += ["", "---- %s ----" % title, text.rstrip()]
    for r in ranks:
        if r.result is None and r.outcome in ("exited", "signaled"):
            heads.append(_ended_without_result(r))
            at = stacks.stood_at(spec.stack_path(r.rank)) if r.outcome == "signaled" else None
            if at is not None:
                body.append("  rank %d stood at %s" % (r.rank, at))
    if outcome.timed_out:
        hung = [r for r in ranks if r.outcome == "timed-out"]
        heads.append("timed out after %g s: %s still running" % (spec.timeout,
                                                                rank_list(r.rank for r in hung)))
        body += [""] + _stood_lines(spec, hung, only_program_frames=False)
    stopped = [r for r in ranks if r.outcome == "stopped"]
    if stopped and not outcome.timed_out:
        body += ["", "%s stopped when the failure above ended the test" % rank_list(
            r.rank for r in stopped)] + _stood_lines(spec, stopped, only_program_frames=True)
    return heads, body


def _skip_verdict(ranks):
    skipped = [r for r in ranks if r.result is not None and r.result["skipped"]]
    if not skipped:
        return None
    if len(skipped) == len(ranks):
        return Verdict("skipped", skipped[0].result["skipped"])
    others = [r.rank for r in ranks if r not in skipped]
    return Verdict("failed", "%s skipped (%s) and %s did not: a distributed test skips on every "
                   "rank or on none" % (rank_list(r.rank for r in skipped),
                                        skipped[0].result["skipped"], rank_list(others)))


def judge(spec, outcome, audit_result):
    """The test's verdict. ``audit_result`` is None when the audit did not run."""
    heads, body = _rank_sections(spec, outcome)
    if not heads:
        skip = _skip_verdict(outcome.ranks)
        if skip is not None:
            return skip
    findings = []
    if audit_result is not None:
        rank_failed = any(r.failed and r.outcome in ("exited", "signaled") for r in outcome.ranks)
        findings = audit_result.findings(without=("rank-failure",) if rank_failed else ())
        if audit_result.error:
            heads.append("the audit could not judge the trace: %s" % audit_result.error)
        elif not audit_result.passed and not heads:
            first = next((b for b in findings if b.startswith("FAIL ")), "FAIL (see below)")
            heads.append("audit: " + first.splitlines()[0][len("FAIL "):])
    if not heads:
        return Verdict("passed")
    text = [heads[0]] + ["also: " + h for h in heads[1:]] + body
    if findings and audit_result is not None and not audit_result.passed:
        text += ["", "ddp-sim audit of the ranks' trace: FAILED"]
        text += ["  " + line for b in findings for line in b.splitlines()]
    return Verdict("failed", "\n".join(text))
