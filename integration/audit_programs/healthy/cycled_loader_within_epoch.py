"""Two datasets trained together, as Lightning's CombinedLoader(mode="max_size_cycle") does: each
epoch runs the longer loader to its end and restarts the shorter one whenever it runs out; both
samplers get set_epoch(epoch) once an epoch, so the shorter one's restarts within an epoch repeat
its order (one epoch = 640 main samples; the 160 auxiliary ones seen 4 times, W = 4). Healthy."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x, a = torch.randn(640, 8), torch.randn(160, 8)
    main_ds = TensorDataset(x, (x[:, 0] > 0).long())
    aux_ds = TensorDataset(a, (a[:, 1] > 0).long())
    main_sampler, aux_sampler = DistributedSampler(main_ds), DistributedSampler(aux_ds)
    main_loader = DataLoader(main_ds, batch_size=16, sampler=main_sampler)
    aux_loader = DataLoader(aux_ds, batch_size=16, sampler=aux_sampler)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        main_sampler.set_epoch(epoch)
        aux_sampler.set_epoch(epoch)
        aux = iter(aux_loader)
        for xb, yb in main_loader:
            try:
                ab, ay = next(aux)
            except StopIteration:  # the shorter loader restarts, as max_size_cycle does
                aux = iter(aux_loader)
                ab, ay = next(aux)
            opt.zero_grad()
            (F.cross_entropy(model(xb), yb) + F.cross_entropy(model(ab), ay)).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
