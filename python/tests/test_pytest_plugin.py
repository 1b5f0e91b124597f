"""The pytest plugin (ddph_pytest) tested with pytest's own pytester: each case writes a test
file, runs a real pytest on it in a subprocess (real forked ranks, real gloo, the real ddp-sim
audit) and checks its outcome and its output. Run by ctest (python/CMakeLists.txt):

    python3 -m pytest -p pytester tests/test_pytest_plugin.py      (from python/; DDPH_SIM set)

Every run gets a private TMPDIR, which must be empty afterwards (no world folder left), and the
ranks of the hanging cases write their pids (and a DataLoader worker's), which must all be gone.
"""

import os
import shutil
import sys
import tempfile

import pytest

from ddph_audit import environment

pytest_plugins = ["pytester"]

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_TIMEOUT_S = 300  # one inner pytest run, hangs included (theirs end at 16-20 s: room for
# the ranks to reach their deadlock on 2 loaded cores, DataLoader worker included)


def _ddp_sim():
    sim = os.environ.get(environment.SIM) or shutil.which("ddp-sim")
    if not sim:
        pytest.skip("ddp-sim is not built: set DDPH_SIM to build/bin/ddp-sim")
    return sim


@pytest.fixture
def inner(pytester, monkeypatch):
    """run(*args): a pytest subprocess on the files in pytester.path with the plugin loaded."""
    monkeypatch.setenv("PYTHONPATH", PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv(environment.SIM, _ddp_sim())
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    monkeypatch.setenv("COLUMNS", "300")  # the short summary whole
    tmp = tempfile.mkdtemp(prefix="ddph-t-")  # short: DataLoader workers make sockets in it
    monkeypatch.setenv("TMPDIR", tmp)

    def run(*args, plugin=True):
        head = ["-p", "ddph_pytest.plugin"] if plugin else []
        result = pytester.runpytest_subprocess(*head, "-p", "no:cacheprovider", *args,
                                               timeout=RUN_TIMEOUT_S)
        assert os.listdir(tmp) == [], "left in TMPDIR: %s" % os.listdir(tmp)
        return result

    yield run
    shutil.rmtree(tmp)


def _alive(pid):
    """True while ``pid`` is a process that is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _pids(folder):
    return [int(open(os.path.join(folder, name)).read()) for name in sorted(os.listdir(folder))]


ALLREDUCE = """
import pytest, torch, torch.distributed as dist

@pytest.mark.distributed(world_size=4, timeout=60)
def test_allreduce(rank, world_size):
    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    assert t.item() == sum(range(world_size))
"""


def test_every_rank_passes(inner, pytester):
    pytester.makepyfile(test_sum=ALLREDUCE)
    result = inner("-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*ddph: distributed tests audited by *ddp-sim*",
                                 "*test_sum.py::test_allreduce PASSED*"])


def test_a_failing_rank_fails_the_test_with_its_rank_named(inner, pytester):
    pytester.makepyfile(test_one_rank="""
        import pytest, torch, torch.distributed as dist

        @pytest.mark.distributed(world_size=4, timeout=60)
        def test_sum(rank, world_size):
            t = torch.tensor([float(rank)])
            dist.all_reduce(t)
            if rank == 2:
                assert t.item() == 7, "rank 2 saw the sum " + str(t.item())
        """)
    result = inner()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*FAILED test_one_rank.py::test_sum - rank 2: AssertionError: rank 2 saw the sum 6.0*",
    ])
    result.stdout.fnmatch_lines(["---- rank 2 ----", "rank = 2, world_size = 4",
                                 ">*assert t.item() == 7*", "E*AssertionError: rank 2 saw the sum 6.0"])
    assert "---- rank 0" not in result.stdout.str()
    assert "rank 0: " not in result.stdout.str()


HANG = """
import os, pytest, torch, torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

PIDS = {pids!r}

def note_pid(name):
    with open(os.path.join(PIDS, name), "w") as f:
        f.write(str(os.getpid()))

@pytest.mark.distributed(world_size=2, timeout=20)
def test_deadlock(rank):
    note_pid("rank-%d" % rank)
    data = TensorDataset(torch.arange(4.0))
    loader = DataLoader(data, sampler=DistributedSampler(data), num_workers=1,
                        persistent_workers=True, worker_init_fn=lambda w: note_pid("worker-%d" % rank))
    next(iter(loader))
    t = torch.zeros(1)
    dist.all_reduce(t)
    dist.recv(t, src=1 - rank)
"""


def test_a_hang_ends_at_the_timeout_naming_where_each_rank_is_blocked(inner, pytester):
    pids = pytester.mkdir("pids")
    pytester.makepyfile(test_hang=HANG.format(pids=str(pids)))
    result = inner()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "timed out after 20 s: ranks 0, 1 still running",
        "  rank 0 stood at test_hang.py:* in test_deadlock: dist.recv(t, src=1 - rank) (inside recv*",
        "  rank 1 stood at test_hang.py:* in test_deadlock: dist.recv(t, src=1 - rank) (inside recv*",
        "ddp-sim audit of the ranks' trace: FAILED",
        "  FAIL rank-failure*on rank 0: rank 0 was still running at the launcher's timeout (a hang)*"
        "recv float32[[]1[]] with rank 1*",
    ])
    assert sorted(os.listdir(pids)) == ["rank-0", "rank-1", "worker-0", "worker-1"]
    assert [pid for pid in _pids(pids) if _alive(pid)] == []


def test_a_rank_in_the_stop_state_is_woken_stopped_and_named(inner, pytester):
    """The stop rule's SIGCONT: a rank frozen by SIGSTOP ends at the stop's SIGTERM, and
    launch.json's was_stopped lets the audit say it was stopped, not crashed."""
    pytester.makepyfile(test_frozen="""
        import os, signal, pytest, torch, torch.distributed as dist

        @pytest.mark.distributed(world_size=2, timeout=15)
        def test_frozen(rank):
            if rank == 1:
                os.kill(os.getpid(), signal.SIGSTOP)
            dist.all_reduce(torch.zeros(1))
        """)
    result = inner()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "timed out after 15 s: ranks 0, 1 still running",
        "ddp-sim audit of the ranks' trace: FAILED",
        "  FAIL rank-failure*rank 1 never reached the collective the others waited in*(rank 1 was "
        "stopped, not crashed: state T*",
    ])


def test_an_audit_finding_fails_the_test_with_its_text(inner, pytester):
    pytester.makepyfile(test_epochs="""
        import pytest, torch, torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

        @pytest.mark.distributed(world_size=2)
        def test_two_epochs(rank):
            data = TensorDataset(torch.arange(40.0))
            loader = DataLoader(data, batch_size=5, sampler=DistributedSampler(data))
            for epoch in range(2):
                for (x,) in loader:
                    dist.all_reduce(x)
        """)
    result = inner()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "audit: reshuffle at epoch 0: loader 0 (TensorDataset, 40 samples): *",
        "ddp-sim audit of the ranks' trace: FAILED",
        "  FAIL reshuffle at epoch 0: loader 0 (TensorDataset, 40 samples): epochs 0 and 1 give "
        "the same order*",
        "*likely cause: set_epoch(epoch) is not called before each epoch*",
        "*FAILED test_epochs.py::test_two_epochs - audit: reshuffle at epoch 0: *",
    ])


def test_fixtures_are_built_per_rank(inner, pytester):
    log = pytester.path / "fixtures.log"
    pytester.makepyfile(test_fixtures="""
        import os, pytest, torch, torch.distributed as dist

        LOG = {log!r}

        def note(line):
            with open(LOG, "a") as f:
                f.write(line + "\\n")

        @pytest.fixture(scope="module")
        def shared():
            note("shared built")
            yield 41
            note("shared finalized")

        @pytest.fixture
        def shard(rank, world_size):
            note("shard built on rank %d" % rank)
            yield list(range(rank, 12, world_size))
            note("shard finalized on rank %d" % rank)

        def test_plain_first(shared):
            assert shared == 41

        @pytest.mark.distributed(world_size=3)
        def test_per_rank(rank, world_size, shard, shared, tmp_path):
            assert shard[0] == rank and shared == 41
            paths = [None] * world_size
            dist.all_gather_object(paths, str(tmp_path))
            assert len(set(paths)) == world_size, paths
        """.format(log=str(log)))
    result = inner()
    result.assert_outcomes(passed=2)
    lines = log.read_text().splitlines()
    assert lines.count("shared built") == 1 and lines.count("shared finalized") == 1
    assert lines[-1] == "shared finalized"  # by the pytest process, after the ranks
    for rank in range(3):
        assert lines.count("shard built on rank %d" % rank) == 1
        assert lines.count("shard finalized on rank %d" % rank) == 1


TWO_TESTS = """
import pytest, torch, torch.distributed as dist

@pytest.mark.distributed(world_size=2)
def test_a_fails(rank):
    assert rank == 0

@pytest.mark.distributed(world_size=2)
def test_b_passes(rank, world_size):
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == world_size
"""


def test_x_stops_at_the_first_failure_and_k_selects(inner, pytester):
    pytester.makepyfile(test_two=TWO_TESTS)
    inner("-x").assert_outcomes(failed=1)
    inner("-k", "passes").assert_outcomes(passed=1, deselected=1)


def test_xdist_workers_run_distributed_tests(inner, pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_two=TWO_TESTS, test_sum=ALLREDUCE)
    result = inner("-n", "2")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*FAILED test_two.py::test_a_fails - rank 1: AssertionError*"])


def test_pytest_timeout_below_the_marker_stops_the_ranks_first(inner, pytester):
    pytest.importorskip("pytest_timeout")
    pytester.makepyfile(test_slow="""
        import pytest, torch, torch.distributed as dist

        @pytest.mark.distributed(world_size=2, timeout=300)
        def test_deadlock(rank):
            dist.recv(torch.zeros(1), src=1 - rank)
        """)
    result = inner("--timeout", "20")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["timed out after 16 s: ranks 0, 1 still running",
                                 "  rank 0 stood at test_slow.py:* in test_deadlock:*"])


def test_without_ddp_sim_one_line_says_where_to_point(inner, pytester, monkeypatch):
    pytester.makepyfile(test_sum=ALLREDUCE)
    monkeypatch.delenv(environment.SIM)
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin")
    if shutil.which("ddp-sim"):
        pytest.skip("a ddp-sim is installed on the system PATH")
    result = inner()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*FAILED test_sum.py::test_allreduce - ddph: ddp-sim not found "
                                 "on PATH*"])
    inner("--ddph-no-audit").assert_outcomes(passed=1)


def test_gpu_code_runs_on_cpu_ranks_with_ddph_cpu(inner, pytester):
    pytester.makepyfile(test_gpu="""
        import pytest, torch, torch.distributed as dist

        @pytest.mark.distributed(world_size=2, backend="nccl")
        def test_cuda_allreduce(rank):
            torch.cuda.set_device(rank)
            t = torch.ones(2).cuda()
            dist.all_reduce(t)
            assert t.sum().item() == 4
        """)
    inner("--ddph-cpu").assert_outcomes(passed=1)


def test_a_skip_on_every_rank_skips_and_a_bad_marker_is_one_line(inner, pytester):
    pytester.makepyfile(test_marks="""
        import unittest, pytest

        @pytest.mark.distributed(world_size=2)
        def test_skipped(rank):
            pytest.skip("needs 8 GPUs")

        @pytest.mark.distributed(world_size=0)
        def test_no_ranks():
            pass

        @pytest.mark.distributed(world_size=2, ranks=3)
        def test_unknown_argument():
            pass

        class TestOldStyle(unittest.TestCase):
            @pytest.mark.distributed(world_size=2)
            def test_method(self):
                pass
        """)
    result = inner("-rfs")
    result.assert_outcomes(skipped=1, failed=3)
    result.stdout.fnmatch_lines([
        "*test_no_ranks - @pytest.mark.distributed: world_size=0 is not a whole number of ranks*",
        "*test_unknown_argument - @pytest.mark.distributed: unknown argument ranks (it takes*",
        "*TestOldStyle::test_method - @pytest.mark.distributed works on test functions and methods"
        " of plain classes, not on unittest.TestCase methods*",
    ])
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_marks.py:3: needs 8 GPUs"])


def test_a_parametrized_world_size_gives_the_world_of_each_case(inner, pytester):
    pytester.makepyfile(test_sizes="""
        import pytest, torch, torch.distributed as dist

        @pytest.mark.distributed
        @pytest.mark.parametrize("world_size", [1, 2, 3])
        def test_sizes(rank, world_size):
            t = torch.ones(1)
            dist.all_reduce(t)
            assert t.item() == world_size == dist.get_world_size()
        """)
    inner().assert_outcomes(passed=3)
