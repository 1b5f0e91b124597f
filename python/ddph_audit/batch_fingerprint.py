"""A cheap content fingerprint of one batch, for data that has no sampler indices.

An IterableDataset (or ``DataLoader(batch_size=None)`` over one) hands out batches no index
names, so whether two ranks trained on the same samples can only be told from the data itself.
The fingerprint hashes each tensor's dtype, shape and at most ``SAMPLED`` of its elements, taken at
evenly spaced positions (a view, then one small copy): its cost is bounded whatever the batch's
size. Other leaves (numbers, strings, bytes) are hashed through ``repr``, cut to ``SAMPLED``
characters. Two batches with the same fingerprint hold, for every practical purpose, the same
samples (docs/audit.md, "Data with no sampler indices").
"""

import hashlib

SAMPLED = 64  # elements (or characters) hashed per leaf
_MAX_LEAVES = 32


def _leaves(data, out):
    if len(out) >= _MAX_LEAVES:
        return
    if isinstance(data, (list, tuple)):
        for x in data:
            _leaves(x, out)
    elif isinstance(data, dict):
        for k in sorted(data, key=repr):
            _leaves(data[k], out)
    else:
        out.append(data)


def _tensor_bytes(t):
    flat = t.detach().reshape(-1)
    n = flat.numel()
    if n > SAMPLED:
        flat = flat[:: n // SAMPLED][:SAMPLED]
    flat = flat.cpu().contiguous()
    try:
        return flat.numpy().tobytes()
    except (TypeError, RuntimeError):  # bfloat16 and others numpy has no type for
        return repr(flat.tolist()).encode()


def fingerprint(data):
    """A short hex digest of ``data``'s content (nested tuples, lists, dicts of tensors and values)."""
    import torch
    h = hashlib.blake2b(digest_size=8)
    leaves = []
    _leaves(data, leaves)
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            h.update(("%s%s" % (leaf.dtype, tuple(leaf.shape))).encode())
            h.update(_tensor_bytes(leaf))
        else:
            h.update(repr(leaf)[:SAMPLED].encode("utf-8", "replace"))
        h.update(b"|")
    return h.hexdigest()
