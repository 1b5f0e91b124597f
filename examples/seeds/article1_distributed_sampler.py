"""The first seed article's DDP example ("pytorch中关于distributedsampler函数的使用"), as written.

Its second example: CustomDataset of 100 numbers, DistributedSampler, nccl, DDP, a loop that calls
loss.backward() every batch with no optimizer (the parameters never change) and no set_epoch.
One change, marked "# changed:": the batch made a float column (the article feeds the integer
batch straight into nn.Linear(1, 10), which cannot run anywhere). On a laptop, with the CUDA face
of torch served by the CPU and nccl run on gloo:
    ddp-sim launch --audit --cpu -n 4 -- python3 article1_distributed_sampler.py
"""
# 导入相关模块和库
import torch
import torch.distributed as dist
from torch.utils.data import Dataset, DataLoader, DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP

# 定义数据集类
class CustomDataset(Dataset):
    def __init__(self):
        self.data = list(range(100))

    def __getitem__(self, index):
        return self.data[index]

    def __len__(self):
        return len(self.data)

# 定义模型类
class CustomModel(torch.nn.Module):
    def __init__(self):
        super(CustomModel, self).__init__()
        self.fc1 = torch.nn.Linear(1, 10)
        self.fc2 = torch.nn.Linear(10, 1)

    def forward(self, x):
        x = self.fc1(x)
        x = torch.nn.functional.relu(x)
        x = self.fc2(x)
        return x

# 初始化进程组
dist.init_process_group(backend='nccl')

# 创建数据集和数据加载器，并使用DistributedSampler进行数据划分
dataset = CustomDataset()
sampler = DistributedSampler(dataset, num_replicas=dist.get_world_size(), rank=dist.get_rank())
data_loader = DataLoader(dataset=dataset, batch_size=10, sampler=sampler)

# 创建模型并使用DDP进行分布式模型训练
model = CustomModel()
model = DDP(model)

for epoch in range(10):
    epoch_loss = 0.0
    for data in data_loader:
        x = data.float().unsqueeze(1)  # changed: was `x = data` (int64 [10] into nn.Linear(1, 10))
        y = model(x)
        loss = torch.nn.functional.mse_loss(y, x)
        epoch_loss += loss.item()
        loss.backward()
    print(f"Epoch {epoch+1} loss: {epoch_loss/len(data_loader)}")
