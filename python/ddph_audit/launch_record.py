"""``launch.json``, Python's one writer of it: how each rank process of a run ended, as its
launcher saw it (docs/trace-format.md, "launch.json"; the C++ writer is
core/trace/src/launch_record.cpp, which writes the same keys in the same order).

The pytest plugin's world (ddph_pytest/world.py) writes it beside its ranks' trace, so that
``ddp-sim audit`` tells a rank its launcher stopped from one that died. The file is written whole
or not at all (a temporary file in the same folder, then renamed onto it), as every writer of the
harness writes. ``audit_python.launch_record`` holds what this writes to the format page.
"""

import json
import os

LAUNCH_RECORD = "launch.json"
OUTCOMES = ("exited", "signaled", "timed-out", "stopped", "hung-at-exit")


def rank_entry(rank, pid, outcome, code, signal, was_stopped=False):
    """One rank: ``outcome`` one of OUTCOMES; ``was_stopped`` when it was in the stop state (T)
    as the launcher ended it."""
    if outcome not in OUTCOMES:
        raise ValueError("outcome %r is none of %s" % (outcome, ", ".join(OUTCOMES)))
    entry = {"rank": int(rank), "pid": int(pid), "outcome": outcome, "code": int(code),
             "signal": int(signal)}
    if was_stopped:
        entry["was_stopped"] = True
    return entry


def launch_record(launcher, world_size, exit_code, timed_out, ranks, interrupted_by_signal=0):
    """The record: ``ranks`` made by ``rank_entry``, in rank order."""
    return {"launcher": launcher, "world_size": int(world_size), "exit_code": int(exit_code),
            "timed_out": bool(timed_out), "interrupted_by_signal": int(interrupted_by_signal),
            "ranks": list(ranks)}


def write_launch_record(folder, record):
    """``folder``/launch.json (the folder made if needed), replaced whole or not at all."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, LAUNCH_RECORD)
    temp = "%s.tmp.%d" % (path, os.getpid())  # as ddph::common::writeFileAtomically names it
    try:
        with open(temp, "w") as f:
            json.dump(record, f, indent=2)
            f.write("\n")
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    return path
