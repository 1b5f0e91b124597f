"""nn.SyncBatchNorm under the CPU emulation of CUDA: two real gloo ranks, each with half of a batch,
give what one BatchNorm gives over the whole batch (output, input gradient, running statistics; the
weight's and bias's gradients summed over the ranks), through DDP as a GPU program builds it
(convert_sync_batchnorm, .cuda(rank), device_ids); torch's refusal of CPU input is back after
uninstrument."""

import os
import tempfile
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ddph_emulation.cuda_on_cpu import CudaOnCpuInstrumentor

WORLD = 2


def batch():
    g = torch.Generator().manual_seed(3)
    return torch.randn(8, 3, 5, 5, generator=g) * 2 + 1, torch.randn(8, 3, 5, 5, generator=g)


def model():
    torch.manual_seed(0)
    m = nn.Sequential(nn.BatchNorm2d(3, momentum=0.3))
    with torch.no_grad():
        m[0].weight.copy_(torch.tensor([0.5, 1.5, -1.0]))
        m[0].bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
    return m


def rank_main(rank, store, results):
    emulation = CudaOnCpuInstrumentor(gpus=WORLD)
    emulation.instrument()
    dist.init_process_group("nccl", init_method="file://" + store, rank=rank, world_size=WORLD)
    net = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(model()).cuda(rank), device_ids=[rank])
    x, dy = batch()
    half = slice(rank * 4, rank * 4 + 4)
    xs = x[half].clone().cuda(rank).requires_grad_()
    y = net(xs)
    # The loss's gradient is dy; DDP averages the parameters' gradients over the 2 ranks.
    (y * dy[half]).sum().backward()
    bn = net.module[0]
    torch.save({"y": y.detach(), "dx": xs.grad, "dw": bn.weight.grad * WORLD,
                "db": bn.bias.grad * WORLD, "mean": bn.running_mean, "var": bn.running_var},
               os.path.join(results, "rank%d.pt" % rank))
    del net
    dist.destroy_process_group()


class SyncBatchNormOnCpu(unittest.TestCase):
    def test_two_ranks_match_one_batch_norm_over_the_whole_batch(self):
        with tempfile.TemporaryDirectory() as folder:
            mp.start_processes(rank_main, args=(os.path.join(folder, "store"), folder),
                               nprocs=WORLD, start_method="fork")
            ranks = [torch.load(os.path.join(folder, "rank%d.pt" % r)) for r in range(WORLD)]
        x, dy = batch()
        reference = model()
        xs = x.clone().requires_grad_()
        y = reference(xs)
        (y * dy).sum().backward()
        bn = reference[0]
        close = dict(rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(torch.cat([r["y"] for r in ranks]), y.detach(), **close)
        torch.testing.assert_close(torch.cat([r["dx"] for r in ranks]), xs.grad, **close)
        for r in ranks:
            torch.testing.assert_close(r["dw"], bn.weight.grad, **close)
            torch.testing.assert_close(r["db"], bn.bias.grad, **close)
            torch.testing.assert_close(r["mean"], bn.running_mean, **close)
            torch.testing.assert_close(r["var"], bn.running_var, **close)

    def test_uninstrument_gives_back_torchs_refusal_of_cpu_input(self):
        emulation = CudaOnCpuInstrumentor(gpus=1)
        emulation.instrument()
        net = nn.SyncBatchNorm(3).eval()
        self.assertEqual(net(torch.ones(2, 3)).shape, (2, 3))  # evaluation: plain batch norm
        emulation.uninstrument()
        with self.assertRaisesRegex(ValueError, "expected input tensor to be on GPU"):
            net(torch.ones(2, 3))


if __name__ == "__main__":
    unittest.main()
