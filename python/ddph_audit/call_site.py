"""Where the program made a call: the innermost frame of its own code, and the training framework
the call went through from there (``coll``'s ``at`` and ``via``: docs/trace-format.md).

A frame is the program's when its module is none of torch's, the harness's or a framework's and
its file is not a library's (process_hooks' rule). Frames of a framework met on the way out name
it: ``self.all_gather(x)`` in a LightningModule's hook is the program's call at that hook's line,
through lightning; a barrier Lightning makes for itself is placed at the program's
``trainer.fit(...)``, through lightning. Standard library only.
"""

import ast
import linecache
import os
import re
import sys
import textwrap


# Frames under these folders are torch's, Python's or the recorder's, not the program's.
_LIBRARY_PARTS = ("/site-packages/", "/dist-packages/", "/lib/python3", "/ddph_audit/",
                  "/ddph_emulation/", "<frozen ")
# A DataLoader worker's error re-raised in the main process carries the worker's traceback as text.
TEXT_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def is_program_file(filename):
    return not any(part in filename for part in _LIBRARY_PARTS)


# A framework's top-level packages, by the name a cause uses for it.
FRAMEWORKS = {"lightning": "lightning", "pytorch_lightning": "lightning",
              "lightning_fabric": "lightning", "torchmetrics": "torchmetrics"}
# Packages that are neither the program nor a framework it calls through.
_LIBRARIES = {"torch", "torchvision", "lightning_utilities", "ddph_audit", "ddph_emulation",
              "ddph_launch", "ddph_pytest", "ddph_elastic", "functools", "contextlib"}


def _top_package(frame):
    return (frame.f_globals.get("__name__") or "").split(".", 1)[0]


def is_program_frame(frame):
    """The frame runs the program's own code: not torch's, a framework's or the harness's."""
    top = _top_package(frame)
    return top not in FRAMEWORKS and top not in _LIBRARIES and is_program_file(frame.f_code.co_filename)


def program_call_site(skip=2):
    """``("train.py:45 in validation_epoch_end", "lightning")``: the innermost frame of the
    program's own code outside the caller ``skip`` frames up, and the framework between (or None);
    ``(None, None)`` when no frame is the program's."""
    try:
        frame = sys._getframe(skip)
    except ValueError:
        return None, None
    via = None
    while frame is not None:
        top = _top_package(frame)
        if top in FRAMEWORKS:
            via = via or FRAMEWORKS[top]
        elif is_program_frame(frame):
            code = frame.f_code
            return "%s:%d in %s" % (os.path.basename(code.co_filename), frame.f_lineno,
                                    code.co_name), via
        frame = frame.f_back
    return None, None


def _called_name(func):
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def list_display_argument(skip, function, position, keyword):
    """Whether the program's call of ``function`` ``skip`` frames up passed a list display
    (``[cfg]``) as its argument at ``position`` (or named ``keyword``): read from the call's
    source line(s), a statement of up to six lines. False when the caller is not the program's
    own code or its source cannot be read."""
    try:
        frame = sys._getframe(skip)
    except ValueError:
        return False
    if not is_program_frame(frame):
        return False
    lines = linecache.getlines(frame.f_code.co_filename)
    first = frame.f_lineno
    for last in range(first, min(first + 6, len(lines) + 1)):
        try:
            tree = ast.parse(textwrap.dedent("".join(lines[first - 1:last])))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called_name(node.func) == function:
                arg = node.args[position] if len(node.args) > position else next(
                    (k.value for k in node.keywords if k.arg == keyword), None)
                return isinstance(arg, ast.List)
        return False
    return False
