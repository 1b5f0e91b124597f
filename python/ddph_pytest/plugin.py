"""pytest's side: the ``distributed`` marker, the ``rank``/``world_size`` fixtures, the options.

Registered through the ``pytest11`` entry point of ``pip install ./python`` (or ``-p
ddph_pytest.plugin``). A test marked ``@pytest.mark.distributed(world_size=N)`` builds no fixture
in the pytest process: its setup there is empty, and its call forks the N ranks (``world``), each
of which builds the test's fixtures, runs its body and tears down what it built
(``rank_process``). The call fails unless every rank passed and ``ddp-sim audit`` found nothing in
their trace (``verdict``); the ranks' output is forwarded, each line prefixed ``[rank<R>]: ``, to
pytest's capture of the call.
"""

import os
import re
import shutil
import sys
import tempfile
import uuid

import pytest

from . import audit_run, rank_process, verdict, world

MARKER = "distributed"
DEFAULT_TIMEOUT_S = 120.0
MARKER_HELP = ("distributed(world_size, timeout=%g, cpu=False, backend='gloo', audit=True): run the "
               "test on world_size ranks, each a process forked from pytest with the default "
               "process group initialised (gloo, 127.0.0.1); it passes when every rank passes "
               "and ddp-sim audit finds nothing in their trace (ddph_pytest)" % DEFAULT_TIMEOUT_S)
_KNOWN_ARGS = ("world_size", "timeout", "cpu", "backend", "audit")


def pytest_addoption(parser):
    group = parser.getgroup("ddph", "distributed tests (@pytest.mark.distributed, ddph_pytest)")
    group.addoption("--ddph-cpu", action="store_true", default=False,
                    help="serve the CUDA face of torch from the CPU in every rank (nccl runs on "
                         "gloo, cuda devices are the CPU), as ddp-sim launch --cpu")
    group.addoption("--ddph-no-audit", action="store_true", default=False,
                    help="run the ranks without recording them or running ddp-sim audit")
    group.addoption("--ddph-trace-dir", default=None, metavar="DIR",
                    help="keep each distributed test's trace in DIR/<test id>/ (for ddp-sim audit "
                         "--html); by default it is removed with the test's private folder")
    group.addoption("--ddph-timeout", type=float, default=None, metavar="S",
                    help="the ranks' deadline for tests whose marker gives none (default %g s)"
                         % DEFAULT_TIMEOUT_S)


def pytest_configure(config):
    config.addinivalue_line("markers", MARKER_HELP)


def pytest_report_header(config):
    if config.getoption("ddph_no_audit"):
        return "ddph: distributed tests run without the audit (--ddph-no-audit)"
    sim = audit_run.find_ddp_sim()
    return "ddph: distributed tests audited by %s" % sim if sim else audit_run.NOT_FOUND


class DistributedTestFailed(pytest.fail.Exception):
    """The failure of a distributed test: its text is the verdict's, shown without a traceback
    into this plugin; its first line goes to the short summary (``pytest_runtest_makereport``)."""

    def __init__(self, text):
        super().__init__(text, pytrace=False)
        self.headline = text.splitlines()[0] if text else ""


class DistributedTestSkipped(pytest.skip.Exception):
    """Every rank skipped: reported at the test's own line, not at this plugin's."""


def _is_distributed(item):
    return type(item) is pytest.Function and item.get_closest_marker(MARKER) is not None


def _no_fixtures_in_pytest_process():
    """A distributed test's setup in the pytest process: its fixtures are built in each rank."""


def pytest_itemcollected(item):
    if _is_distributed(item):
        item.setup = _no_fixtures_in_pytest_process
    elif item.get_closest_marker(MARKER) is not None:  # a unittest.TestCase method, a doctest
        item.runtest = _not_a_test_function


def _not_a_test_function():
    raise DistributedTestFailed("@pytest.mark.distributed works on test functions and methods of "
                                "plain classes, not on unittest.TestCase methods or doctests")


@pytest.fixture
def rank():
    """This process's rank in a test marked ``@pytest.mark.distributed``."""
    return _current("rank")[0]


@pytest.fixture
def world_size():
    """The number of ranks of a test marked ``@pytest.mark.distributed``."""
    return _current("world_size")[1]


def _current(name):
    current = rank_process.current()
    if current is None:
        pytest.fail("the %s fixture exists only in tests marked @pytest.mark.distributed"
                    "(world_size=N)" % name, pytrace=False)
    return current


def _bad(message):
    raise DistributedTestFailed("@pytest.mark.distributed: " + message)


def _world_size(item, marker):
    if marker.args:
        size = marker.args[0]
    elif "world_size" in marker.kwargs:
        size = marker.kwargs["world_size"]
    elif "world_size" in getattr(getattr(item, "callspec", None), "params", {}):
        size = item.callspec.params["world_size"]
    else:
        _bad("world_size is missing (world_size=N, or a parametrized world_size)")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        _bad("world_size=%r is not a whole number of ranks >= 1" % (size,))
    return size


def _timeout(item, marker):
    """The marker's timeout, else --ddph-timeout, else the default; below pytest-timeout's own
    limit when that is smaller, so that the ranks are stopped and named before it fires."""
    timeout = marker.kwargs.get("timeout", item.config.getoption("ddph_timeout"))
    timeout = DEFAULT_TIMEOUT_S if timeout is None else timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        _bad("timeout=%r is not a number of seconds > 0" % (timeout,))
    outer = item.get_closest_marker("timeout")
    outer = outer.args[0] if outer is not None and outer.args else None
    if outer is None and item.config.pluginmanager.hasplugin("timeout"):
        outer = item.config.getoption("timeout", None)
    if isinstance(outer, (int, float)) and 0 < outer <= timeout:
        timeout = outer * 0.8
    return float(timeout)


def _spec(item, marker, folder):
    unknown = sorted(set(marker.kwargs) - set(_KNOWN_ARGS))
    if unknown:
        _bad("unknown argument %s (it takes %s)" % (", ".join(unknown), ", ".join(_KNOWN_ARGS)))
    cpu = bool(marker.kwargs.get("cpu", False) or item.config.getoption("ddph_cpu"))
    audit = bool(marker.kwargs.get("audit", True)) and not item.config.getoption("ddph_no_audit")
    return world.WorldSpec(world_size=_world_size(item, marker), timeout=_timeout(item, marker),
                           backend=str(marker.kwargs.get("backend", "gloo")), cpu=cpu,
                           audit=audit, folder=folder, run_id=uuid.uuid4().hex[:16])


def _extra_threads(item):
    """The threads of this process other than the main one (and an xdist worker's channel
    thread): a rank forked beside them could inherit a lock one of them holds."""
    tasks = os.listdir("/proc/self/task")
    expected = 2 if hasattr(item.config, "workerinput") else 1
    if len(tasks) <= expected:
        return []
    names = []
    for tid in tasks:
        if int(tid) == os.getpid():
            continue
        try:
            with open("/proc/self/task/%s/comm" % tid) as f:
                names.append(f.read().strip())
        except OSError:
            names.append(tid)
    return names


def _forward_output(spec):
    """Each rank's output into pytest's capture of the call, a line at a time, prefixed."""
    for rank in range(spec.world_size):
        for path, stream in ((spec.stdout_path(rank), sys.stdout),
                             (spec.stderr_path(rank), sys.stderr)):
            try:
                with open(path, errors="replace") as f:
                    for line in f:
                        stream.write("[rank%d]: %s" % (rank, line if line.endswith("\n")
                                                       else line + "\n"))
            except FileNotFoundError:
                pass


def _prepare_shared_fixtures(item):
    """pytest's base temporary folder made here, once: each rank's tmp_path is then a folder of
    its own under the same base (not a base folder per rank)."""
    factory = getattr(item.config, "_tmp_path_factory", None)
    if factory is not None and {"tmp_path", "tmpdir"} & set(item.fixturenames):
        factory.getbasetemp()


def _keep_trace(item, spec):
    keep = item.config.getoption("ddph_trace_dir")
    if keep and os.path.isdir(spec.trace_dir):
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid).strip("_")
        target = os.path.join(keep, name)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(spec.trace_dir, target)


def run_distributed(item, marker):
    sim = None
    with tempfile.TemporaryDirectory(prefix="ddph-pytest-") as folder:
        spec = _spec(item, marker, folder)
        if spec.audit:
            sim = audit_run.find_ddp_sim()
            if sim is None:
                raise DistributedTestFailed(audit_run.NOT_FOUND)
        threads = _extra_threads(item)
        if threads:
            raise DistributedTestFailed(
                "ddph: cannot fork the ranks: this pytest process runs %d other thread(s) (%s), "
                "whose locks a forked rank could inherit; end them before the distributed tests"
                % (len(threads), ", ".join(threads)))
        _prepare_shared_fixtures(item)
        outcome = world.run(item, spec)
        _forward_output(spec)
        audit_result = (audit_run.audit(sim, spec.trace_dir, spec.report_path()) if spec.audit
                        else None)
        result = verdict.judge(spec, outcome, audit_result)
        _keep_trace(item, spec)
    if result.outcome == "skipped":
        raise DistributedTestSkipped(result.text)
    if result.outcome == "failed":
        raise DistributedTestFailed(result.text)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if rank_process.current() is not None or not _is_distributed(pyfuncitem):
        return None  # in a rank, the test runs as usual
    run_distributed(pyfuncitem, pyfuncitem.get_closest_marker(MARKER))
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """The verdict shown at the test, not at this plugin: a failure without a traceback has no
    crash line, so pytest's short summary would show no reason (the verdict's first line is given
    as the crash message), and a skip would be located in this file."""
    outcome = yield
    excinfo = call.excinfo
    if excinfo is None or not isinstance(excinfo.value, (DistributedTestFailed,
                                                         DistributedTestSkipped)):
        return
    report = outcome.get_result()
    _, line, _ = item.location
    line = (line or 0) + 1
    if isinstance(excinfo.value, DistributedTestSkipped):
        if report.skipped:
            report.longrepr = (str(item.path), line, "Skipped: %s" % excinfo.value.msg)
        return
    try:
        from _pytest._code.code import ReprFileLocation
        crash = ReprFileLocation(str(item.path), line, excinfo.value.headline)
        report.longrepr.reprcrash = crash
        chain = getattr(report.longrepr, "chain", None)
        if chain:  # what pytest-xdist sends back to the controller
            chain[-1] = (chain[-1][0], crash, chain[-1][2])
    except (ImportError, AttributeError, TypeError):
        pass  # another pytest: the summary names the test without its reason
