"""What a TensorDataset holds, told apart across ranks without calling ``__getitem__``.

A dataset with no file listing (data made or loaded in memory) can still differ across ranks: a
random subset drawn after a per-rank seed, data permuted once per rank, a per-rank filter. Reading
items generically would call the program's ``__getitem__``, which may draw from the global random
state (augmentation) and so change the program; a TensorDataset's items are rows of its
``tensors``, read here by indexing the tensors themselves: no random state, no I/O, no autograd.

- ``items``: a hash of the first, middle and last rows (each tensor's dtype, shape and at most 64
  sampled elements of the row: ``batch_fingerprint``), so its cost does not grow with the data.
- ``content``: a digest that does not depend on the rows' order: each tensor's bytes read as
  integers and summed over the rows (exact, and the same in any order), hashed. Two ranks whose
  ``items`` differ and whose ``content`` agrees hold the same samples in different orders. Computed
  only for CPU tensors of at most ``CONTENT_LIMIT`` bytes in all (one pass over them).
"""
import hashlib

from . import batch_fingerprint

CONTENT_LIMIT = 64 * 1024 * 1024  # bytes: the content digest is one pass over this much at most


def _tensors(dataset):
    """The dataset's tensors when it is a TensorDataset (or a subclass), else None."""
    import torch
    if not isinstance(dataset, torch.utils.data.TensorDataset):
        return None
    tensors = getattr(dataset, "__dict__", {}).get("tensors")
    if not isinstance(tensors, (list, tuple)) or not tensors:
        return None
    if not all(isinstance(t, torch.Tensor) and t.dim() > 0 for t in tensors):
        return None
    n = tensors[0].shape[0]
    if n == 0 or any(t.shape[0] != n for t in tensors):
        return None
    return tensors


def items(dataset):
    """A hex digest of the first, middle and last rows of a TensorDataset, or None."""
    import torch
    tensors = _tensors(dataset)
    if tensors is None:
        return None
    n = tensors[0].shape[0]
    h = hashlib.blake2b(digest_size=8)
    with torch.no_grad():
        for i in sorted({0, n // 2, n - 1}):
            h.update(batch_fingerprint.fingerprint([t[i] for t in tensors]).encode())
    return h.hexdigest()


_AS_INTEGERS = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def _row_sums(t):
    """The tensor's elements read as integers of their size, summed over the rows (int64)."""
    import torch
    as_int = _AS_INTEGERS.get(t.element_size())
    if as_int is None or t.is_complex() or t.layout != torch.strided:
        return None
    x = t.detach().contiguous()
    x = x.view(getattr(torch, as_int))
    return x.sum(dim=0, dtype=torch.int64)


def content(dataset):
    """A hex digest of a TensorDataset's rows that does not depend on their order, or None."""
    import torch
    tensors = _tensors(dataset)
    if tensors is None or any(t.device.type != "cpu" for t in tensors):
        return None
    if sum(t.numel() * t.element_size() for t in tensors) > CONTENT_LIMIT:
        return None
    h = hashlib.blake2b(digest_size=8)
    with torch.no_grad():
        for t in tensors:
            sums = _row_sums(t)
            if sums is None:
                return None
            h.update(("%s%s" % (t.dtype, tuple(t.shape))).encode())
            h.update(sums.numpy().tobytes())
    return h.hexdigest()
