"""ddph_audit auto-instrumentation (``ddp-sim launch --audit`` puts this folder first on PYTHONPATH).

1. Runs the ``sitecustomize`` this file shadows (the next one on sys.path, e.g. Debian's
   /etc/python3.11/sitecustomize.py), as Python would have.
2. Installs what the environment switches on, from ddph_audit's one registry of instrumentors
   (ddph_audit/registry.py), in its order: with DDPH_NODES (``--nnodes``) the emulated node's host
   name now and its Gloo address when torch.distributed is imported; with DDPH_AUDIT_DIR the
   recorder's lazy import hooks (nothing torch-related is imported here; a process that never
   imports torch pays nothing); with DDPH_CPU (``--cpu``) the CPU emulation of CUDA when torch is
   imported, after the recorder's hooks, so that it wraps them; with DDPH_STAND_IN_DATA
   (``--stand-in-data``) torchvision's downloading datasets served offline (ddph_emulation).
"""

import os
import sys


def _chain_shadowed_sitecustomize():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    after = None
    for i, entry in enumerate(sys.path):
        try:
            if os.path.abspath(entry or os.getcwd()) == here:
                after = sys.path[i + 1:]
                break
        except (TypeError, ValueError):
            continue
    if after is None:
        after = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", after)
    if spec is None or spec.loader is None:
        return
    if spec.origin and os.path.abspath(spec.origin) == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # what site.execsitecustomize does
        if sys.flags.verbose:
            sys.excepthook(*sys.exc_info())
        else:
            sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                             "%s: %s\n" % (e.__class__.__name__, e))


def _install():
    try:
        import ddph_audit
        ddph_audit.install_from_environment()
    except Exception as e:
        sys.stderr.write("ddph_audit: not installed: %s: %s\n" % (type(e).__name__, e))


_chain_shadowed_sitecustomize()
_install()
