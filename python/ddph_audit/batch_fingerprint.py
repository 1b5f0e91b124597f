"""A cheap content fingerprint of one batch, for data that has no sampler indices.

An IterableDataset (or ``DataLoader(batch_size=None)`` over one) hands out batches no index
names, so whether two ranks trained on the same samples can only be told from the data itself.
The fingerprint hashes each tensor's dtype, shape and at most ``SAMPLED`` of its elements, taken at
evenly spaced positions (a view, then one small copy): its cost is bounded whatever the batch's
size. Other leaves (numbers, strings, bytes) are hashed through ``repr``, cut to ``SAMPLED``
characters. Two batches with the same fingerprint hold, for every practical purpose, the same
samples (docs/audit.md, "Data with no sampler indices").

``sample_fingerprints`` hashes each sample of a collated batch the same way (its row of every
tensor that has one, at most ``ROW_SAMPLED`` elements of it): ranks whose streams overlap in
samples but not in batches (the same shards in other orders) are told by these.
"""

import hashlib

SAMPLED = 64  # elements (or characters) hashed per leaf
ROW_SAMPLED = 16  # elements hashed per sample of a leaf
_MAX_LEAVES = 32
_MAX_ROWS = 4096  # samples of one batch given a fingerprint of their own


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


def sample_fingerprints(data):
    """One short hex digest per sample of a collated batch (every tensor leaf with the same first
    dimension, at most ``_MAX_ROWS`` samples), or None when the batch is not one (no tensor leaf,
    leaves of other lengths)."""
    import torch
    leaves = []
    _leaves(data, leaves)
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    if not tensors or any(t.dim() == 0 for t in tensors):
        return None
    rows = tensors[0].shape[0]
    if rows < 1 or rows > _MAX_ROWS or any(t.shape[0] != rows for t in tensors):
        return None
    columns = []
    for t in tensors:
        flat = t.detach().reshape(rows, -1)
        n = flat.shape[1]
        if n > ROW_SAMPLED:
            flat = flat[:, :: n // ROW_SAMPLED][:, :ROW_SAMPLED]
        flat = flat.cpu().contiguous()
        try:
            columns.append(flat.numpy())
        except (TypeError, RuntimeError):  # bfloat16 and others numpy has no type for
            columns.append(flat.float().numpy())
    out = []
    for i in range(rows):
        h = hashlib.blake2b(digest_size=6)
        for c in columns:
            h.update(c[i].tobytes())
            h.update(b"|")
        out.append(h.hexdigest())
    return out
