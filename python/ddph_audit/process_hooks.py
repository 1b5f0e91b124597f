"""Process-level events: ``error`` (sys.excepthook, chained), ``params``/``end`` at exit (atexit),
by the ``ProcessInstrumentor``, installed when recording starts (registry.py). ``record_error``,
``note_exit_code`` and ``at_exit`` also serve the spawned ranks' entry and, through ddph_audit's
``record_error`` / ``finish``, the pytest plugin's ranks.

The exit code in ``end`` is best effort: 1 after an uncaught exception, the argument of
``sys.exit`` when the program called it (``sys.exit`` is wrapped, nothing else changes), the
``SystemExit`` code when running under ``python -m ddph_audit``, else 0. ``os._exit`` and signals
skip atexit: no ``end`` (that is the point: such a trace was cut short).
"""

import atexit
import functools
import os
import sys

from . import trace_events
from .call_site import TEXT_FRAME, is_program_file, is_program_frame
from .instrumentor import Instrumentor

MESSAGE_MAX = 20000
def _where(filename, line, function):
    return "%s:%d in %s" % (os.path.basename(filename), line, function)


def innermost_program_frame(tb, msg):
    """``"train.py:28 in __getitem__"``: the innermost frame of the program's own code, from the
    traceback text a DataLoader worker put in ``msg`` when there is one, else from ``tb``."""
    for filename, line, function in reversed(TEXT_FRAME.findall(msg)):
        if is_program_file(filename):
            return _where(filename, int(line), function)
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if is_program_frame(tb.tb_frame):
            found = _where(code.co_filename, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    return found


def _last_line(msg):
    """The error's own line: a worker's wrapped traceback ends with ``"ValueError: …"``."""
    if "Traceback (most recent call last)" not in msg:
        return None
    lines = [line for line in msg.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else None


def _exit_code(code):
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code
    return 1


def note_exit_code(recorder, code):
    recorder.exit_code = _exit_code(code)


def record_error(recorder, exc_type, exc, tb=None):
    if recorder.error_seen:
        return
    recorder.error_seen = True
    if exc_type is not None and issubclass(exc_type, SystemExit):
        note_exit_code(recorder, getattr(exc, "code", None))
        return
    try:
        msg = str(exc)
    except Exception:
        msg = "<unprintable %s>" % getattr(exc_type, "__name__", "exception")
    if len(msg) > MESSAGE_MAX:
        msg = msg[:MESSAGE_MAX] + "..."
    recorder.exit_code = 1
    fields = {"type": getattr(exc_type, "__name__", str(exc_type)), "message": msg}
    try:
        where = innermost_program_frame(tb, msg)
        last = _last_line(msg)
    except Exception:  # the traceback is a convenience: never lose the error for it
        where = last = None
    if where:
        fields["where"] = where
    if last:
        fields["last_line"] = last
    recorder.emit(trace_events.ERROR, **fields)


def at_exit(session):
    """Writes ``params`` (each live DDP module) and ``end``; then closes the file."""
    rec = session.recorder
    if rec.writer is None or rec.ended or os.getpid() != rec.writer.pid:
        return
    rec.ended = True
    try:
        if not rec.active:
            return
        if not rec.writer.is_open:
            # Never learned its rank: rank 0, if it recorded anything and no rank 0 wrote.
            if not rec.writer.has_queued:
                return
            rec.open_trace(rec.rank if rec.rank is not None else 0, rec.world_size or 1,
                           exclusive=True)
            if not rec.writer.is_open:
                return
        session.ddp.write_end_params()
        code = rec.exit_code if rec.exit_code is not None else 0
        rec.emit(trace_events.END, code=code)
    except Exception as e:
        rec.fail(e, "exit")
    finally:
        try:
            rec.writer.close()
        except Exception:
            pass


class ProcessInstrumentor(Instrumentor):
    """``sys.excepthook`` records the uncaught exception, then calls the hook it replaced;
    ``sys.exit`` notes its code (``functools.wraps`` of the original, nothing else changes);
    ``at_exit`` runs at interpreter exit."""

    NAME = "process hooks"

    def _instrument(self):
        previous_hook = sys.excepthook
        recorder = self.session.recorder

        def excepthook(exc_type, exc, tb):
            try:
                if recorder.active:
                    record_error(recorder, exc_type, exc, tb)
            except Exception as e:
                recorder.fail(e, "excepthook")
            return (previous_hook or sys.__excepthook__)(exc_type, exc, tb)

        original_exit = sys.exit

        @functools.wraps(original_exit)
        def sys_exit(*args):
            try:
                note_exit_code(recorder, args[0] if args else None)
            except Exception:
                pass
            return original_exit(*args)

        self._ours = {"excepthook": excepthook, "exit": sys_exit}
        self.patch(sys, "excepthook", excepthook)
        self.patch(sys, "exit", sys_exit)
        atexit.register(self.at_exit)

    def at_exit(self):
        at_exit(self.session)

    def _uninstrument(self):
        atexit.unregister(self.at_exit)
        # A hook the program set over ours stays: only what is still ours is put back.
        self._patches[:] = [(owner, name, held) for owner, name, held in self._patches
                            if getattr(owner, name, None) is self._ours.get(name)]
