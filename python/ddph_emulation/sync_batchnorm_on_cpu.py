"""``nn.SyncBatchNorm`` on CPU tensors, for the CPU emulation of CUDA (cuda_on_cpu.py).

torch's SyncBatchNorm refuses CPU input (its forward, and DDP's constructor: "SyncBatchNorm layers
only work with GPU modules"), and its autograd function calls CUDA-only kernels. Under ``--cpu`` a
training forward on CPU input runs ``CpuSyncBatchNorm`` instead: the same statistics as torch's
CUDA function (the batch's mean and biased variance over every rank's samples, from one
all_reduce of the per-channel sums, sums of squares and counts; the running statistics updated
with the unbiased variance) and the same gradients (the input's from one all_reduce of the
per-channel sums of the gradient and of the gradient times the centred input; the weight's and
bias's local, for DDP to average). Evaluation and a world of one rank use ``F.batch_norm``, as torch
does. docs/cpu-emulation.md, "What is emulated".
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F


def _channel_shape(x):
    return [1, x.shape[1]] + [1] * (x.dim() - 2)


def _sum_but_channels(t):
    return t.sum(dim=[d for d in range(t.dim()) if d != 1])


class CpuSyncBatchNorm(torch.autograd.Function):
    """The autograd function of a synchronized batch norm over the CPU ranks of ``group``."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum, group):
        channels = x.shape[1]
        count = torch.tensor([float(x.numel() // channels)], dtype=torch.float64)
        xd = x.detach().to(torch.float64)
        stats = torch.cat([_sum_but_channels(xd), _sum_but_channels(xd * xd), count])
        dist.all_reduce(stats, group=group)
        total = stats[-1]
        mean = stats[:channels] / total
        var = (stats[channels:2 * channels] / total - mean * mean).clamp_min(0)
        invstd = torch.rsqrt(var + eps)
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(momentum * mean.to(running_mean.dtype))
        if running_var is not None:
            unbiased = var * total / (total - 1).clamp_min(1)
            running_var.mul_(1 - momentum).add_(momentum * unbiased.to(running_var.dtype))
        shape = _channel_shape(x)
        mean_c, invstd_c = mean.to(x.dtype).view(shape), invstd.to(x.dtype).view(shape)
        x_hat = (x - mean_c) * invstd_c
        ctx.save_for_backward(x_hat, weight, invstd_c)
        ctx.total = total.item()
        ctx.group = group
        y = x_hat
        if weight is not None:
            y = y * weight.view(shape)
        if bias is not None:
            y = y + bias.view(shape)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        x_hat, weight, invstd_c = ctx.saved_tensors
        channels = grad_y.shape[1]
        shape = _channel_shape(grad_y)
        sum_dy = _sum_but_channels(grad_y)  # the bias's gradient, this rank's
        sum_dy_xhat = _sum_but_channels(grad_y * x_hat)  # the weight's gradient, this rank's
        grad_weight = sum_dy_xhat.clone() if weight is not None and ctx.needs_input_grad[1] else None
        grad_bias = sum_dy.clone() if ctx.needs_input_grad[2] else None
        grad_x = None
        if ctx.needs_input_grad[0]:
            sums = torch.cat([sum_dy, sum_dy_xhat]).to(torch.float64)
            dist.all_reduce(sums, group=ctx.group)
            mean_dy = (sums[:channels] / ctx.total).to(grad_y.dtype).view(shape)
            mean_dy_xhat = (sums[channels:] / ctx.total).to(grad_y.dtype).view(shape)
            scale = invstd_c if weight is None else invstd_c * weight.view(shape)
            grad_x = scale * (grad_y - mean_dy - x_hat * mean_dy_xhat)
        return grad_x, grad_weight, grad_bias, None, None, None, None, None


def forward_on_cpu(original_forward):
    """SyncBatchNorm.forward that runs CPU input through CpuSyncBatchNorm (CUDA input: torch's)."""

    def forward(self, input):
        if input.is_cuda:
            return original_forward(self, input)
        self._check_input_dim(input)
        if hasattr(self, "_check_non_zero_input_channels"):
            self._check_non_zero_input_channels(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative moving average
                momentum = 1.0 / self.num_batches_tracked.item()
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        running_mean = self.running_mean if not self.training or self.track_running_stats else None
        running_var = self.running_var if not self.training or self.track_running_stats else None
        group = self.process_group or dist.group.WORLD
        if not (bn_training and self.training and dist.get_world_size(group) > 1):
            return F.batch_norm(input, running_mean, running_var, self.weight, self.bias,
                                bn_training, momentum, self.eps)
        return CpuSyncBatchNorm.apply(input, self.weight, self.bias, running_mean, running_var,
                                      self.eps, momentum, group)

    forward.__wrapped__ = original_forward
    forward.__name__ = "forward"
    return forward


def ddp_allows_cpu_sync_batchnorm(self, module):
    """DistributedDataParallel._passing_sync_batchnorm_handle without its "only GPU modules"."""
    return None
