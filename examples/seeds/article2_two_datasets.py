"""The second seed article's loop ("使用 PyTorch DDP 遍历两个数据集"), made to run on CPU.

Two datasets iterated with zip() (the shorter one ends every epoch early: at W=4 the first set
loses 88 samples per epoch), DistributedSampler + set_epoch on both, Adam. Changes, each marked
"# changed:": gloo instead of nccl and no CUDA device; in-memory stand-ins for MNIST (600 samples,
1x28x28) and CIFAR-10 (500 samples, 3x32x32) instead of torchvision downloads (already
normalised as the article's transform would); the images flattened (and CIFAR's made 28x28
grey) because the article's nn.Linear(28 * 28, ...) cannot take them as they are; the
training loop run directly by each launched process instead of torch.multiprocessing.spawn with an
undefined `train`. Run it with a launcher, e.g.
    ddp-sim launch -n 4 --audit trace -- python3 article2_two_datasets.py
"""
import torch
import torch.distributed as dist
from torch.utils.data import TensorDataset  # changed: stand-in datasets instead of torchvision
# 初始化分布式环境
dist.init_process_group(backend='gloo')  # changed: 'nccl' -> 'gloo' (CPU)
# 获取当前进程的 GPU id
local_rank = dist.get_rank()
# changed: no torch.cuda.set_device(local_rank); everything stays on the CPU
device = torch.device("cpu")  # changed: used where the article moves tensors .to(local_rank)

from torch.utils.data import DataLoader, DistributedSampler


def stand_in(n, shape, seed):  # changed: random images in [-1, 1] (ToTensor + Normalize(0.5, 0.5))
    g = torch.Generator().manual_seed(seed)
    images = torch.rand((n,) + shape, generator=g) * 2 - 1
    return TensorDataset(images, torch.randint(0, 10, (n,), generator=g))


# 创建两个数据集
dataset1 = stand_in(600, (1, 28, 28), 1)  # changed: datasets.MNIST(root='./data', train=True, ...)
dataset2 = stand_in(500, (3, 32, 32), 2)  # changed: datasets.CIFAR10(root='./data', train=True, ...)
# 创建分布式采样器
sampler1 = DistributedSampler(dataset1)
sampler2 = DistributedSampler(dataset2)
# 创建数据加载器
data_loader1 = DataLoader(dataset1, batch_size=64, sampler=sampler1)
data_loader2 = DataLoader(dataset2, batch_size=64, sampler=sampler2)

from torch.nn.parallel import DistributedDataParallel as DDP
import torch.nn as nn
# 假设我们有一个简单的模型
model = nn.Sequential(
nn.Linear(28 * 28, 128), # MNIST 图片 28x28
nn.ReLU(),
nn.Linear(128, 10)
).to(device)  # changed: .to(local_rank)
# 将模型包装为 DDP 模型
model = DDP(model)  # changed: no device_ids=[local_rank] on the CPU

import torch.optim as optim
# 定义优化器
optimizer = optim.Adam(model.parameters(), lr=0.001)
criterion = nn.CrossEntropyLoss()
for epoch in range(10): # 设置训练的轮数
    sampler1.set_epoch(epoch) # 设置分布式采样器的训练周期
    sampler2.set_epoch(epoch)
    for (data1, target1), (data2, target2) in zip(data_loader1, data_loader2):
        data1, target1 = data1.to(device), target1.to(device)  # changed: .to(local_rank)
        data2, target2 = data2.to(device), target2.to(device)  # changed: .to(local_rank)
        data1 = data1.flatten(1)  # changed: flatten for nn.Linear(28 * 28, ...)
        data2 = data2.mean(1)[:, 2:30, 2:30].flatten(1)  # changed: CIFAR grey, centre 28x28, flat
        optimizer.zero_grad() # 清零梯度
        output1 = model(data1) # 计算输出
        output2 = model(data2)
        loss1 = criterion(output1, target1) # 计算损失
        loss2 = criterion(output2, target2)
        loss = loss1 + loss2 # 合并损失
        loss.backward() # 反向传播
        optimizer.step() # 更新参数
