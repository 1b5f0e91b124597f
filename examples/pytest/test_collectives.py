"""Distributed unit tests with ddph_pytest (docs/pytest.md): each test runs on world_size ranks,
each rank a process forked from pytest with the default process group on gloo.

    PATH=build/bin:$PATH PYTHONPATH=python python3 -m pytest -p ddph_pytest.plugin examples/pytest

Two of these tests pass; three fail on purpose, to show what a failure says: an assertion on one
rank, a forgotten set_epoch that only the audit sees, and a hang.
"""

import pytest
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


@pytest.mark.distributed(world_size=4, timeout=60)
def test_allreduce(rank, world_size):
    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    assert t.item() == sum(range(world_size))


@pytest.fixture
def shard(rank, world_size):
    """Built in each rank: this rank's share of 12 samples."""
    return list(range(rank, 12, world_size))


@pytest.mark.distributed(world_size=3)
def test_every_sample_once(shard, world_size):
    everyone = [None] * world_size
    dist.all_gather_object(everyone, shard)
    assert sorted(i for part in everyone for i in part) == list(range(12))


@pytest.mark.distributed(world_size=4)
def test_broadcast_weights(rank):
    weights = torch.full((3,), float(rank))
    dist.broadcast(weights, src=1)
    if rank == 2:
        weights += 1  # a rank-local update slipped in, on purpose: rank 2 diverges
    assert torch.equal(weights, torch.ones(3))


@pytest.mark.distributed(world_size=2)
def test_two_epochs(rank):
    data = TensorDataset(torch.arange(40.0))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=5, sampler=sampler)
    for epoch in range(2):  # sampler.set_epoch(epoch) forgotten: the audit finds it
        for (x,) in loader:
            dist.all_reduce(x)


@pytest.mark.distributed(world_size=2, timeout=10)
def test_exchange(rank):
    t = torch.zeros(1)
    dist.recv(t, src=1 - rank)  # both ranks receive first: a deadlock
    dist.send(t, dst=1 - rank)
