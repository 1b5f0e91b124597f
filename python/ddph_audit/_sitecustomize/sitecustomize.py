"""ddph_audit auto-instrumentation (``ddp-sim launch --audit`` puts this folder first on PYTHONPATH).

1. Runs the ``sitecustomize`` this file shadows (the next one on sys.path, e.g. Debian's
   /etc/python3.11/sitecustomize.py), as Python would have.
2. If DDPH_AUDIT_DIR is set, installs ddph_audit's lazy import hooks (nothing torch-related is
   imported here; a process that never imports torch pays nothing).
3. If DDPH_CPU is set (``--cpu``), installs the CPU emulation of CUDA when torch is imported
   (ddph_emulation/cuda_on_cpu.py), after the recorder's hooks, so that it wraps them.
4. If DDPH_STAND_IN_DATA is set (``--stand-in-data``), serves torchvision's downloading datasets
   when torchvision.datasets is imported (ddph_emulation/stand_in_data.py).
5. If DDPH_NODES is set (``--nnodes``), gives the rank its emulated node's host name now and its
   node's Gloo address when torch.distributed is imported (ddph_emulation/emulated_node.py).
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


def _start_audit():
    try:
        from ddph_audit import environment
        if not os.environ.get(environment.AUDIT_DIR):
            return
        from ddph_audit import _autostart
        _autostart.start()
    except Exception as e:
        sys.stderr.write("ddph_audit: not recording: %s: %s\n" % (type(e).__name__, e))


def _start_emulation():
    try:
        from ddph_audit import environment
        if environment.is_on(environment.CPU):
            from ddph_emulation import cuda_on_cpu
            cuda_on_cpu.instrument_when_torch_is_imported()
        if environment.is_on(environment.STAND_IN_DATA):
            from ddph_emulation import stand_in_data
            stand_in_data.instrument_when_torchvision_is_imported()
    except Exception as e:
        sys.stderr.write("ddph_audit: no --cpu / --stand-in-data: %s: %s\n" % (type(e).__name__, e))


def _start_nodes():
    try:
        from ddph_audit import environment
        if not environment.is_on(environment.NODES):
            return
        from ddph_emulation import emulated_node
        emulated_node.install()
    except Exception as e:
        sys.stderr.write("ddph_audit: no emulated node (--nnodes): %s: %s\n" % (type(e).__name__, e))


_chain_shadowed_sitecustomize()
_start_nodes()
_start_audit()
_start_emulation()
