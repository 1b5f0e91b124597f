"""A GAN whose discriminator is wrapped in DDP and whose generator is not: the generator's
gradients flow through the wrapped discriminator, but nothing averages them, so each rank steps
its own generator with its own batch's gradients and the generators part from the first step.
--wrap-both: the healthy twin (the generator wrapped too)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--wrap-both", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    real = torch.randn(512, 8) * 0.5 + 1.0
    data = TensorDataset(real)
    sampler = DistributedSampler(data, seed=9)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    generator = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
    if args.wrap_both:
        generator = DDP(generator)
    discriminator = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)))
    opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
    noise = torch.Generator().manual_seed(100 + dist.get_rank())  # each rank its own noise
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for (xb,) in loader:
            z = torch.randn(len(xb), 4, generator=noise)
            fake = generator(z)
            opt_d.zero_grad()
            d_loss = (F.binary_cross_entropy_with_logits(discriminator(xb), torch.ones(len(xb), 1))
                      + F.binary_cross_entropy_with_logits(discriminator(fake.detach()),
                                                           torch.zeros(len(xb), 1)))
            d_loss.backward()
            opt_d.step()
            opt_g.zero_grad()
            F.binary_cross_entropy_with_logits(discriminator(fake), torch.ones(len(xb), 1)).backward()
            opt_g.step()
    del generator, discriminator
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
