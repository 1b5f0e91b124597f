"""The environment variables of the Python side, each spelled once.

``ddp-sim launch`` sets them in every rank (its C++ names: core/common/include/ddph/common/
environment.h, ``kAuditDir`` for ``AUDIT_DIR``, ...); the recorder, the emulation and the pytest
plugin read them from here. ``audit_python.environment`` (tests/test_environment.py) fails until
this module and the header name the same variables. Standard library only: the sitecustomize of
every audited process imports it.
"""

import os

AUDIT_DIR = "DDPH_AUDIT_DIR"  # the trace folder: set, the process records (ddp-sim launch --audit)
AUDIT_RUN_ID = "DDPH_AUDIT_RUN_ID"  # the run's id, in every rank's header
AUDIT_RANK_PID = "DDPH_AUDIT_RANK_PID"  # the audited rank that started this process (a worker)
AUDIT_SPAWNER = "DDPH_AUDIT_SPAWNER"  # an audited process starting ranks of its own (mp.spawn)
AUDIT_PYTHONPATH = "DDPH_AUDIT_PYTHONPATH"  # where ddp-sim finds these packages (read by ddp-sim)
CPU = "DDPH_CPU"  # --cpu: the CUDA face of torch served by the CPU
CPU_GPUS = "DDPH_CPU_GPUS"  # --gpus: the stand-in CUDA devices of a node
CPU_AUTOCAST = "DDPH_CPU_AUTOCAST"  # autocast("cuda") under --cpu: "off" (float32) or "bf16"
STAND_IN_DATA = "DDPH_STAND_IN_DATA"  # --stand-in-data: torchvision's datasets served offline
MNIST_DIR = "DDPH_MNIST_DIR"  # the real MNIST files (scripts/fetch-mnist.sh)
NODES = "DDPH_NODES"  # --nnodes: how many emulated nodes
NODE_ADDR = "DDPH_NODE_ADDR"  # the rank's node's loopback address (127.1.0.2)
NODE_HOSTNAME = "DDPH_NODE_HOSTNAME"  # the rank's node's host name ("node1")
SIM = "DDPH_SIM"  # the ddp-sim the pytest plugin audits with (else ddp-sim on PATH)


def is_on(name, environ=None):
    """Whether switch ``name`` is set to something other than "" or "0"."""
    return (os.environ if environ is None else environ).get(name, "") not in ("", "0")
