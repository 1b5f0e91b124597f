"""A program whose dataset downloads: torchvision's MNIST(download=True) into a folder without its
files. The mirrors are pointed at a closed local port, so the download fails at once and the same
way with or without internet: the rank raises RuntimeError("Error downloading …"), and the audit
names --stand-in-data as the remedy, with the user's own command (cpu_emulation_test). With
--stand-in-data the dataset is served (its 10,000 test images) and the program reads one epoch of it
and exits 0.
"""
import os
import tempfile

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, transforms


def main():
    dist.init_process_group("gloo")
    datasets.MNIST.mirrors = ["http://127.0.0.1:9/"]  # the discard port: connection refused
    root = os.path.join(tempfile.gettempdir(), "ddph-no-mnist-%d" % dist.get_rank())
    data = datasets.MNIST(root=root, train=False, download=True, transform=transforms.ToTensor())
    sampler = DistributedSampler(data)
    for _ in DataLoader(data, batch_size=1000, sampler=sampler):
        pass
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
