"""Where a rank stood when it was stopped: its faulthandler dump read back.

A rank dumps every thread's Python stack into its stacks file on SIGUSR1 (and on a fatal signal).
The signal may be handled on any thread (a gloo thread has no Python frame), so the block that
holds a frame of the program's own code is the one that tells: its innermost such frame is where
the rank stood, with its source line, and the library call it was inside (the collective).
"""

import linecache
import os
import re

_FRAME = re.compile(r'^\s+File "(.+)", line (\d+) in (.+)$')
# Frames under these are torch's, Python's, pytest's or ours, not the test's.
_LIBRARY_PARTS = ("/site-packages/", "/dist-packages/", "/lib/python3", "/ddph_audit/",
                  "/ddph_emulation/", "/ddph_pytest/", "/_pytest/", "/pluggy/", "<frozen ")


def is_program_file(path):
    return not any(part in path for part in _LIBRARY_PARTS)


def _thread_blocks(text):
    """[[(path, line, function), …] innermost first] per thread in the dump."""
    blocks, frames = [], None
    for raw in text.splitlines():
        if "(most recent call first)" in raw:
            frames = []
            blocks.append(frames)
            continue
        m = _FRAME.match(raw)
        if m and frames is not None:
            frames.append((m.group(1), int(m.group(2)), m.group(3).strip()))
    return blocks


class StoodAt:
    """``where`` (file:line in function), ``source`` (that line), ``inside`` (the call it was in)."""

    def __init__(self, path, line, function, inside):
        self.where = "%s:%d in %s" % (os.path.basename(path), line, function)
        self.source = linecache.getline(path, line).strip()
        self.inside = inside

    def __str__(self):
        text = self.where
        if self.source:
            text += ": " + self.source
        if self.inside:
            text += " (inside %s)" % self.inside
        return text


def _inside(frames, index):
    """The library function the program's frame at ``index`` was calling (the recorder's own
    and the emulation's wrappers skipped): ``all_reduce (distributed_c10d.py:1320)``."""
    for path, line, function in reversed(frames[:index]):
        if "/ddph_audit/" in path or "/ddph_emulation/" in path:
            continue
        return "%s (%s:%d)" % (function, os.path.basename(path), line)
    return None


def stood_at(stacks_path):
    """The innermost frame of the program's code in the rank's dump, or None."""
    try:
        with open(stacks_path, errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    for frames in _thread_blocks(text):
        for i, (path, line, function) in enumerate(frames):
            if is_program_file(path):
                return StoodAt(path, line, function, _inside(frames, i))
    return None
