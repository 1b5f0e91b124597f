"""What one rank of a distributed test runs, in a process forked from the pytest process.

In order: tie the process to its parent (killed if pytest dies), its own process group (so the
parent stops the rank and its DataLoader workers at once), its output into the world's folder,
a fresh interpreter's random state, the environment torchrun would give it, the recorder
(``ddph_audit``) and the stack dump on SIGUSR1; then the default process group (gloo, a TCPStore
that rank 0 serves on 127.0.0.1 at a port the kernel picks), the test's fixtures built here, the
test body, the fixtures this rank built torn down, the process group destroyed, the trace ended.
The outcome goes to the parent as one JSON line on the rank's pipe, and the process leaves by
``os._exit``: nothing of the pytest process (its atexit hooks, its temporary folders, the objects
it shares with this copy) is finalised twice.
"""

import ctypes
import datetime
import faulthandler
import json
import logging
import os
import random
import signal
import sys
import tempfile

import ddph_audit
from ddph_audit import environment

_current = None  # (rank, world_size) inside a rank process, else None

# torch's default seed (c10 default_rng_seed_val): what torch.initial_seed() is in a fresh process.
TORCH_DEFAULT_SEED = 67280421310721
PR_SET_PDEATHSIG = 1
EXIT_RANK_SETUP_FAILED = 70  # the rank could not even start (its stderr says why)
# gloo's and the store's own timeout is the test's plus this: the parent's deadline comes first, so
# a hang is stopped with every rank's stack rather than raced by gloo's "Timed out waiting".
GLOO_TIMEOUT_MARGIN_S = 60


def current():
    """(rank, world_size) in a rank process of a distributed test, else None."""
    return _current


def send(fd, message):
    data = (json.dumps(message) + "\n").encode("utf-8")
    while data:
        data = data[os.write(fd, data):]


def _tie_to_parent(parent_pid):
    """Killed with the pytest process (a hard exit, pytest-timeout's thread method); its own
    process group, stdin from /dev/null (a background group must not read the terminal)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before prctl
        os._exit(EXIT_RANK_SETUP_FAILED)
    os.setpgid(0, 0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)


def _redirect_output(out_path, err_path):
    """fd 1 and 2 into this rank's files; sys.stdout/stderr anew over them (pytest's capture in
    the parent replaced both with its own objects); logging to this stderr."""
    for fd, path in ((1, out_path), (2, err_path)):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(logging.StreamHandler(sys.stderr))


def _fresh_random_state(torch):
    """As a fresh interpreter: Python's (and numpy's) generators seeded from the OS, different in
    each rank; torch's at its default seed, the same in every rank, whatever earlier tests did."""
    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()
    torch.manual_seed(TORCH_DEFAULT_SEED)


def _private_temp(spec, rank):
    """Temporary files (multiprocessing's pymp- folders of DataLoader workers, the test's own)
    under the world's folder, which the parent removes, even after a kill."""
    folder = os.path.join(spec.folder, "t%d" % rank)  # short: sockets are made in it (108 bytes)
    os.mkdir(folder)
    tempfile.tempdir = folder
    os.environ["TMPDIR"] = folder


def _rank_environment(spec, rank, port):
    env = {"RANK": rank, "WORLD_SIZE": spec.world_size, "LOCAL_RANK": rank,
           "LOCAL_WORLD_SIZE": spec.world_size, "GROUP_RANK": 0, "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": port, "GLOO_SOCKET_IFNAME": "lo", environment.AUDIT_RUN_ID: spec.run_id}
    if spec.cpu:
        env.update({environment.CPU: 1, environment.CPU_GPUS: spec.world_size})
    for key, value in env.items():
        os.environ[key] = str(value)


def _start_recording(spec):
    ddph_audit.instrument(spec.trace_dir)
    if spec.cpu:
        ddph_audit.install_from_environment((environment.CPU,))


def _store(spec, rank, port, pipe_w):
    """Rank 0 serves the TCPStore at a port the kernel picks and tells the parent, which starts
    the other ranks with it: no port is guessed, so none is taken by another test meanwhile."""
    from torch.distributed import TCPStore
    timeout = datetime.timedelta(seconds=spec.timeout + GLOO_TIMEOUT_MARGIN_S)
    if rank == 0:
        store = TCPStore("127.0.0.1", 0, spec.world_size, True, timeout=timeout,
                         wait_for_workers=False)
        send(pipe_w, {"port": store.port})
        return store, store.port
    return TCPStore("127.0.0.1", port, spec.world_size, False, timeout=timeout), port


def _failure(item, when, excinfo):
    text = str(item.repr_failure(excinfo))
    headline = excinfo.exconly().strip().splitlines()
    return {"when": when, "text": text, "headline": headline[0] if headline else excinfo.typename}


def _record_error(excinfo):
    try:
        ddph_audit.record_error(excinfo.type, excinfo.value, excinfo.tb)
    except Exception:
        pass


def _keep_parents_fixtures(item):
    """The fixtures the parent had built before the fork (a module-scoped one of an earlier
    test) are this rank's copies: asking for one schedules its finish on the rank's setup
    stack, which must not run its teardown here (a module-scoped server of the parent's would
    be stopped by each rank's copy). Their ``finish`` becomes a no-op in this process."""
    for fixturedefs in item._fixtureinfo.name2fixturedefs.values():
        for fixturedef in fixturedefs:
            if fixturedef.cached_result is not None:
                fixturedef.finish = lambda request: None


def _finalize_own_fixtures(item, finalizers_before):
    """Runs, newest first, the finalizers this rank added to each node of pytest's setup stack
    (the parent's own ones, added before the fork, stay for the parent)."""
    first_error = None
    for node, (finalizers, _) in reversed(list(item.session._setupstate.stack.items())):
        while len(finalizers) > finalizers_before.get(node, 0):
            fin = finalizers.pop()
            try:
                fin()
            except BaseException as e:  # the first one is reported
                if first_error is None:
                    first_error = e
    if first_error is not None:
        raise first_error


def run_test(item):
    """Setup (this rank's fixtures), call, teardown of ``item``; {"failures": [...], "skipped"}."""
    import pytest
    failures, skipped = [], None
    stack = item.session._setupstate.stack
    before = {node: len(finalizers) for node, (finalizers, _) in stack.items()}
    _keep_parents_fixtures(item)
    for when, step in (("setup", lambda: type(item).setup(item)), ("call", item.runtest),
                       ("teardown", lambda: _finalize_own_fixtures(item, before))):
        if when == "call" and (failures or skipped):
            continue
        try:
            step()
        except pytest.skip.Exception as e:
            skipped = skipped or str(e.msg if hasattr(e, "msg") else e)
        except BaseException:
            excinfo = pytest.ExceptionInfo.from_current()
            if when == "call":
                _record_error(excinfo)
            failures.append(_failure(item, when, excinfo))
            del excinfo  # its frames hold the test's objects (a DDP module): freed before destroy
    item.funcargs = None
    item._request = False
    return {"failures": failures, "skipped": skipped}


def _destroy_process_group():
    """No gc.collect() first: in a forked copy it touches every object of pytest's heap and so
    copies all its pages (0.2-0.7 s per test at W = 4 on 2 cores). A DDP module still alive here
    cannot hang at its free (docs/audit.md, "DDP alive at destroy_process_group"): the rank leaves
    by os._exit and frees nothing."""
    import torch.distributed as dist
    if dist.is_initialized():
        dist.destroy_process_group()


def run(item, spec, rank, port, pipe_w):
    """The rank's whole life; never returns."""
    global _current
    code = EXIT_RANK_SETUP_FAILED
    try:
        _tie_to_parent(spec.parent_pid)
        _redirect_output(spec.stdout_path(rank), spec.stderr_path(rank))
        _private_temp(spec, rank)
        stack_file = open(spec.stack_path(rank), "w")
        faulthandler.enable(file=stack_file, all_threads=True)
        faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
        import torch
        import torch.distributed as dist
        _fresh_random_state(torch)
        if "OMP_NUM_THREADS" not in os.environ:
            torch.set_num_threads(1)  # as torchrun: W ranks share the machine's cores
        store, port = _store(spec, rank, port, pipe_w)
        _current = (rank, spec.world_size)
        _rank_environment(spec, rank, port)
        if spec.audit:
            _start_recording(spec)
        dist.init_process_group(spec.backend, store=store, rank=rank, world_size=spec.world_size,
                                timeout=datetime.timedelta(
                                    seconds=spec.timeout + GLOO_TIMEOUT_MARGIN_S))
        result = run_test(item)
        _destroy_process_group()
        if spec.audit:
            ddph_audit.finish()
        result["rank"] = rank
        send(pipe_w, {"result": result})
        code = 0
    except BaseException as e:
        try:
            sys.stderr.write("ddph: rank %d could not run the test: %s: %s\n"
                             % (rank, type(e).__name__, e))
            sys.stderr.flush()
            send(pipe_w, {"start_error": "%s: %s" % (type(e).__name__, e), "rank": rank})
        except BaseException:
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
