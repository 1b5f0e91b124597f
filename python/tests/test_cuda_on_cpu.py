"""The CPU emulation of CUDA in one process: what each torch.cuda call answers, where tensors and
modules land, AMP, NCCL run on gloo, DDP(device_ids=...), and an uninstrument that leaves torch as
it found it."""

import io
import os
import tempfile
import unittest

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ddph_emulation.cuda_on_cpu import CudaOnCpuInstrumentor, cpu_backend, is_cuda_device

PATCHED = (torch, torch.cuda, torch.Tensor, nn.Module, DDP, dist, dist.distributed_c10d,
           torch.autocast, torch.cuda.amp.GradScaler, nn.SyncBatchNorm)


def namespaces():
    return [dict(vars(owner)) for owner in PATCHED]


class Emulated(unittest.TestCase):
    def setUp(self):
        self.before = namespaces()
        self.emulation = CudaOnCpuInstrumentor(gpus=4)
        self.emulation.instrument()

    def tearDown(self):
        self.emulation.uninstrument()
        if dist.is_initialized():
            dist.destroy_process_group()

    def test_devices_answer_as_four_stand_ins(self):
        self.assertTrue(torch.cuda.is_available())
        self.assertEqual(torch.cuda.device_count(), 4)
        torch.cuda.set_device(2)
        self.assertEqual(torch.cuda.current_device(), 2)
        self.assertIn("stand-in for cuda:2", torch.cuda.get_device_name())
        self.assertGreater(torch.cuda.get_device_properties(0).total_memory, 0)
        with self.assertRaisesRegex(RuntimeError, "invalid device ordinal"):
            torch.cuda.set_device(4)
        with torch.cuda.device(1):
            self.assertEqual(torch.cuda.current_device(), 1)
        self.assertEqual(torch.cuda.current_device(), 2)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.manual_seed_all(0)
        self.assertEqual(torch.cuda.memory_allocated(), 0)
        self.assertEqual(torch.cuda.max_memory_allocated(0), 0)
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.deterministic = True

    def test_streams_and_events_time_on_the_host_clock(self):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        stream = torch.cuda.Stream()
        start.record()
        with torch.cuda.stream(stream):
            torch.ones(10).sum()
        stream.synchronize()
        end.record()
        torch.cuda.current_stream().wait_stream(stream)
        self.assertGreaterEqual(start.elapsed_time(end), 0.0)

    def test_every_cuda_placement_lands_on_the_cpu(self):
        x = torch.ones(3)
        for moved in (x.cuda(), x.cuda(1), x.to("cuda"), x.to(0), x.to("cuda:1", non_blocking=True),
                      x.to(torch.device("cuda", 3)), x.to(device="cuda", dtype=torch.float64),
                      x.pin_memory(), x.type("torch.cuda.FloatTensor")):
            self.assertEqual(moved.device.type, "cpu")
        self.assertIs(x.cuda(), x)
        self.assertEqual(x.to("cuda", torch.float64).dtype, torch.float64)
        for made in (torch.zeros(2, device="cuda"), torch.tensor([1.0], device=1),
                     torch.arange(4, device=torch.device("cuda", 0)),
                     torch.randn(2, device="cuda:0"), x.new_zeros(2, device="cuda")):
            self.assertEqual(made.device.type, "cpu")
        model = nn.Linear(2, 2)
        self.assertIs(model.cuda(), model)
        self.assertIs(model.to("cuda:0"), model)
        self.assertIs(model.to(1), model)
        self.assertEqual(model.to(torch.float64).weight.dtype, torch.float64)

    def test_cpu_arguments_pass_through_untouched(self):
        x = torch.ones(2, dtype=torch.float32)
        self.assertEqual(x.to(torch.float64).dtype, torch.float64)
        self.assertEqual(x.to("cpu").device.type, "cpu")
        self.assertEqual(torch.zeros(2, device="cpu").device.type, "cpu")
        self.assertFalse(is_cuda_device("cpu"))
        self.assertFalse(is_cuda_device(torch.float16))
        self.assertFalse(is_cuda_device(True))
        self.assertEqual(cpu_backend("gloo"), "gloo")
        self.assertEqual(cpu_backend("mpi"), "mpi")
        self.assertEqual(cpu_backend("nccl"), "gloo")
        self.assertEqual(cpu_backend("cuda:nccl,cpu:gloo"), "gloo")

    def test_torch_load_map_locations_restore_on_the_cpu(self):
        buf = io.BytesIO()
        torch.save({"w": torch.arange(3.0)}, buf)
        for where in ("cuda:1", torch.device("cuda", 0), {"cpu": "cuda:2"},
                      lambda storage, loc: storage.cuda(1), lambda storage, loc: None, None):
            buf.seek(0)
            loaded = torch.load(buf, map_location=where)
            self.assertEqual(loaded["w"].device.type, "cpu")
            self.assertTrue(torch.equal(loaded["w"], torch.arange(3.0)))

    def test_amp_computes_in_float32_and_the_scaler_passes_through(self):
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.cuda.amp.GradScaler()
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            out = model(torch.ones(2, 4))
        self.assertEqual(out.dtype, torch.float32)
        with torch.cuda.amp.autocast():
            loss = model(torch.ones(2, 4)).sum()
        self.assertIs(scaler.scale(loss), loss)
        before = model.weight.detach().clone()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        self.assertEqual(scaler.get_scale(), 1.0)
        self.assertFalse(torch.equal(before, model.weight))  # the step was taken

    def test_bf16_autocast_runs_cpu_autocast(self):
        emulation = CudaOnCpuInstrumentor(gpus=1, autocast="bf16")
        self.emulation.uninstrument()
        emulation.instrument()
        try:
            with torch.autocast("cuda"):
                out = nn.Linear(4, 1)(torch.ones(2, 4))
            self.assertEqual(out.dtype, torch.bfloat16)
        finally:
            emulation.uninstrument()
        self.emulation.instrument()

    def test_nccl_runs_on_gloo_with_ddp_on_stand_in_devices(self):
        with tempfile.TemporaryDirectory() as folder:
            dist.init_process_group("nccl", init_method="file://" + os.path.join(folder, "store"),
                                    rank=0, world_size=1)
            self.assertEqual(dist.get_backend(), "gloo")
            self.assertTrue(dist.is_nccl_available())
            group = dist.new_group([0], backend="nccl")
            t = torch.ones(2, device="cuda")
            dist.all_reduce(t, group=group)
            dist.barrier(device_ids=[0])
            model = DDP(nn.Linear(3, 1).cuda(0), device_ids=[0], output_device=0)
            model(torch.ones(2, 3).cuda()).sum().backward()
            self.assertEqual(model.module.weight.grad.device.type, "cpu")
            self.assertEqual(self.emulation.asked_backend, "nccl")
            del model
            dist.destroy_process_group()

    @unittest.skipUnless(hasattr(torch, "accelerator"), "this torch has no torch.accelerator (< 2.6)")
    def test_torch_accelerator_names_the_stand_in_devices(self):
        acc = torch.accelerator
        self.assertTrue(acc.is_available())
        self.assertEqual(acc.device_count(), 4)
        self.assertEqual(acc.current_accelerator().type, "cuda")
        acc.set_device_index(3)
        self.assertEqual(torch.cuda.current_device(), 3)
        self.assertEqual(torch.ones(2).to(acc.current_accelerator()).device.type, "cpu")
        self.assertFalse(torch.amp.GradScaler("cuda").is_enabled())

    def test_uninstrument_leaves_torch_as_it_found_it(self):
        self.emulation.instrument()  # idempotent
        self.emulation.uninstrument()
        self.emulation.uninstrument()
        after = namespaces()
        for owner, old, new in zip(PATCHED, self.before, after):
            self.assertEqual(set(old), set(new), owner)
            for name in old:
                self.assertIs(old[name], new[name], "%s.%s" % (getattr(owner, "__name__", owner), name))
        self.assertFalse(torch.cuda.is_available())
        self.emulation.instrument()


if __name__ == "__main__":
    unittest.main()
