"""ddph_pytest: distributed tests in pytest, each rank a real process on gloo, the run audited.

    import pytest, torch, torch.distributed as dist

    @pytest.mark.distributed(world_size=4, timeout=60)
    def test_allreduce(rank, world_size):
        t = torch.tensor([float(rank)])
        dist.all_reduce(t)
        assert t.item() == sum(range(world_size))

The test body runs once per rank, each in a process forked from the pytest process, with the
default process group initialised (gloo on 127.0.0.1) and destroyed afterwards; ``rank`` and
``world_size`` are fixtures, every other fixture the test asks for is built in each rank. The
test passes when every rank passes and ``ddp-sim audit`` finds nothing in the ranks' trace
(recorded by ``ddph_audit``). docs/pytest.md has the rules, the options and real output.

Modules, one idea each: ``plugin`` (pytest's hooks, the marker, the options, the fixtures),
``world`` (the parent: starts the ranks, waits with a deadline, stops them), ``rank_process``
(what a forked rank runs), ``stacks`` (where a hung rank is blocked), ``audit_run`` (finds and
runs ``ddp-sim audit``), ``verdict`` (the test's failure text).
"""

__version__ = "0.1.0"
