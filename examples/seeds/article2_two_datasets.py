"""The second seed article's code ("使用 PyTorch DDP 遍历两个数据集"), as written for GPUs.

nccl, torch.cuda.set_device, torchvision's MNIST and CIFAR10 (download=True), DistributedSampler
and set_epoch on both, the model on the GPU, DDP(device_ids=[local_rank]), Adam, two loaders
zipped (the shorter one ends every epoch early: 9,824 MNIST images are never seen per epoch at
W = 4), and torch.multiprocessing.spawn of one rank per GPU. Changes only where the article's own
code cannot run at all, each marked "# changed:": its steps 1-4 are the body of the `train` it
spawns but never defines; the spawned process is given its rank and the world size (it has no
RANK/WORLD_SIZE of its own); the images are flattened (and CIFAR's made 28x28 grey) because its
nn.Linear(28 * 28, ...) cannot take them as they are. On a laptop without internet:
    ddp-sim launch --audit --cpu --stand-in-data -n 1 --gpus 4 -- python3 article2_two_datasets.py
"""
import torch
import torch.distributed as dist


def train(local_rank):  # changed: the article spawns `train` without defining it; its steps 1-4
    # 初始化分布式环境
    dist.init_process_group(backend='nccl', rank=local_rank,  # changed: rank and world size given
                            world_size=torch.cuda.device_count())
    # 获取当前进程的 GPU id
    local_rank = dist.get_rank()
    torch.cuda.set_device(local_rank)

    from torchvision import datasets, transforms
    from torch.utils.data import DataLoader, DistributedSampler
    # 定义数据预处理
    transform = transforms.Compose([
    transforms.ToTensor(),
    transforms.Normalize((0.5,), (0.5,))
    ])
    # 创建两个数据集
    dataset1 = datasets.MNIST(root='./data', train=True, download=True, transform=transform)
    dataset2 = datasets.CIFAR10(root='./data', train=True, download=True, transform=transform)
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
    ).to(local_rank)
    # 将模型包装为 DDP 模型
    model = DDP(model, device_ids=[local_rank])

    import torch.optim as optim
    # 定义优化器
    optimizer = optim.Adam(model.parameters(), lr=0.001)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(10): # 设置训练的轮数
        sampler1.set_epoch(epoch) # 设置分布式采样器的训练周期
        sampler2.set_epoch(epoch)
        for (data1, target1), (data2, target2) in zip(data_loader1, data_loader2):
            data1, target1 = data1.to(local_rank), target1.to(local_rank)
            data2, target2 = data2.to(local_rank), target2.to(local_rank)
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


# 假设你的脚本名为 train.py
if __name__ == '__main__':
    torch.multiprocessing.spawn(train, nprocs=torch.cuda.device_count())
