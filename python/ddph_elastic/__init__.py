"""An elastic DistributedSampler for PyTorch: stop mid-epoch on W ranks, resume on W' ranks, and
every sample of the epoch is seen exactly once (apart from padding).

    from ddph_elastic import ElasticDistributedSampler
    sampler = ElasticDistributedSampler(dataset)        # as DistributedSampler(dataset)
    ...
    checkpoint["sampler"] = sampler.state_dict(consumed=steps_done_this_epoch * batch_size)
    ...                                                  # later, on any number of ranks
    sampler.load_state_dict(checkpoint["sampler"])

Never resumed, it yields exactly what torch.utils.data.DistributedSampler yields. The resume
rule is written down in docs/elastic-resume.md; `python3 -m ddph_elastic` serves the sampler over
ddp-sim's line protocol so `ddp-sim check-sampler --contract elastic` can check it.
"""

from .sampler import ElasticDistributedSampler, ResumePoint, epoch_order, run_shard

__all__ = ["ElasticDistributedSampler", "ResumePoint", "epoch_order", "run_shard"]
