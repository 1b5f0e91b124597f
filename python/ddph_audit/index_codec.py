"""Index lists of the trace format: JSON array, ``{"runs": ...}`` or ``{"i64": base64}``.

``encode`` picks the shortest sensible form:
- runs, when the list is made of few consecutive ascending runs (``0..N-1`` is one run);
- a plain JSON array for short lists;
- little-endian int64 in base64 (RFC 4648, with padding) for long irregular lists.
``decode`` accepts all three (used by the tests and by anyone reading a trace in Python).
"""

import base64
import operator
import sys
from array import array

# Lists up to this length stay JSON arrays unless runs compress them.
SHORT_LIST_MAX = 256


def to_int_list(indices):
    """Converts a sampler's index (int, list, tuple, range, tensor, ndarray) into a list of ints.

    Raises TypeError/ValueError when an element is not an integer (e.g. string keys)."""
    if isinstance(indices, range):
        return list(indices)
    tolist = getattr(indices, "tolist", None)
    if tolist is not None and not isinstance(indices, (list, tuple)):
        indices = tolist()  # torch.Tensor / numpy.ndarray (0-d gives a scalar)
    if isinstance(indices, (list, tuple)):
        try:
            return list(array("q", indices))  # fast path: plain ints
        except TypeError:
            return [operator.index(i) for i in indices]
    return [operator.index(indices)]


def runs_of(values):
    """[[start, length], ...] of consecutive ascending runs of ``values``."""
    runs = []
    start = prev = None
    length = 0
    for v in values:
        if start is not None and v == prev + 1:
            length += 1
        else:
            if start is not None:
                runs.append([start, length])
            start, length = v, 1
        prev = v
    if start is not None:
        runs.append([start, length])
    return runs


def encode(values):
    """Encodes a list of ints as one of the three index-list forms."""
    values = list(values)
    n = len(values)
    if n >= 4:
        runs = runs_of(values)
        if 2 * len(runs) <= n // 2:
            return {"runs": runs}
    if n <= SHORT_LIST_MAX:
        return values
    a = array("q", values)
    if sys.byteorder != "little":
        a.byteswap()
    return {"i64": base64.b64encode(a.tobytes()).decode("ascii")}


def decode(obj):
    """Inverse of ``encode`` (accepts any of the three forms)."""
    if isinstance(obj, list):
        return [int(v) for v in obj]
    if isinstance(obj, dict):
        if "runs" in obj:
            out = []
            for start, length in obj["runs"]:
                out.extend(range(int(start), int(start) + int(length)))
            return out
        if "i64" in obj:
            raw = base64.b64decode(obj["i64"], validate=True)
            if len(raw) % 8:
                raise ValueError("i64 index list: length not a multiple of 8")
            a = array("q")
            a.frombytes(raw)
            if sys.byteorder != "little":
                a.byteswap()
            return list(a)
    raise ValueError("not an index list: %r" % (obj,))
