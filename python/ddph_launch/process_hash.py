"""Whether a program's script depends on Python's per-process string hashing, read from its source
(``ast``, nothing run): it calls ``hash()``, or iterates a set (a ``for`` over ``set(...)``, a set
turned into a list, a tuple or an enumeration). Under torchrun each rank is its own interpreter
with its own hash seed (``PYTHONHASHSEED`` unset: random), so such values and orders differ
between ranks; ranks forked from one server share the server's seed, which would hide the
difference (docs/ddp-sim.md, "How ranks start"). The fork server then lets the ranks exec.
Standard library only."""

import ast
import os

# Calls whose argument, a set, is turned into an ordered sequence.
_ORDERING = {"list", "tuple", "enumerate", "iter", "zip"}


def _is_set(node):
    if isinstance(node, (ast.Set, ast.SetComp)):
        return True
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("set", "frozenset"))


def _why(node):
    """What at `node` depends on the hash seed, or None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "hash" and node.args:
            return "calls hash()"
        if node.func.id in _ORDERING and any(_is_set(a) for a in node.args):
            return "orders a set with %s()" % node.func.id
    if isinstance(node, (ast.For, ast.comprehension)) and _is_set(node.iter):
        return "iterates a set"
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "join" and any(_is_set(a) for a in node.args)):
        return "joins a set"
    return None


def hash_dependence(path, environ=None):
    """``"train.py:32 calls hash()"`` for the first such place in the script at `path`, or None:
    also when PYTHONHASHSEED is set to a number (every process then hashes alike under torchrun
    too) or the script cannot be read."""
    environ = os.environ if environ is None else environ
    seed = environ.get("PYTHONHASHSEED", "random")
    if seed != "random":
        return None
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None
    found = []
    for node in ast.walk(tree):
        why = _why(node)
        if why:
            line = getattr(node, "lineno", None) or getattr(node.iter, "lineno", 0)
            found.append((line, why))
    if not found:
        return None
    line, why = min(found)
    return "%s:%d %s" % (os.path.basename(path), line, why)
