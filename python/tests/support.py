"""Helpers of the ddph_audit tests: run W ranks of a program on 127.0.0.1, bare or audited."""

import json
import os
import socket
import subprocess
import sys

from ddph_audit import environment

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SITECUSTOMIZE_DIR = os.path.join(PYTHON_DIR, "ddph_audit", "_sitecustomize")
PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")
PYTHON = os.environ.get("DDPH_PYTHON") or sys.executable
RUN_TIMEOUT_S = 120


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DDPH_AUDIT") and k not in ("PYTHONPATH", "RANK", "WORLD_SIZE")}
    env["OMP_NUM_THREADS"] = "1"
    return env


def run_ranks(script, args=(), world_size=2, trace_dir=None, mode="site", timeout=RUN_TIMEOUT_S):
    """Runs ``world_size`` ranks; returns [(returncode, stdout, stderr)] in rank order.

    mode "site": the sitecustomize auto-instrumentation; mode "m": python3 -m ddph_audit."""
    port = free_port()
    procs = []
    try:
        for rank in range(world_size):
            env = base_env()
            env.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            cmd = [PYTHON, script] + list(args)
            if trace_dir is not None:
                env[environment.AUDIT_RUN_ID] = "test"
                if mode == "site":
                    env["PYTHONPATH"] = SITECUSTOMIZE_DIR + os.pathsep + PYTHON_DIR
                    env[environment.AUDIT_DIR] = trace_dir
                else:
                    env["PYTHONPATH"] = PYTHON_DIR
                    cmd = [PYTHON, "-m", "ddph_audit", "--trace-dir", trace_dir, script] + list(args)
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        results = []
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            results.append((p.returncode, out, err))
        return results
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()


def saved_environment(*names):
    """{name: its value, or None when unset}, for ``restore_environment``."""
    return {name: os.environ.get(name) for name in names}


def restore_environment(saved):
    """Puts the variables of ``saved_environment`` back as they were."""
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def read_trace(path):
    """The whole lines of a rank's file, up to its first NUL byte (docs/trace-format.md)."""
    with open(path, "rb") as f:
        written = f.read().partition(b"\0")[0]
    return [json.loads(line) for line in written.decode("utf-8").splitlines(keepends=True)
            if line.endswith("\n")]
