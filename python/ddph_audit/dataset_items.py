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

A map-style dataset of the program's own that keeps its samples as column tensors (``self.tokens``,
``self.labels``: every tensor attribute with one row per sample) is read the same way, its columns
in the order of their names (``columns``); a column may be per-rank state rather than samples (a
cache of augmentations), so the audit judges only the same rows in another order from them
(NOTE [A dataset of column tensors], docs/audit.md).
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


def sized(dataset):
    """``len(dataset)``, or None when it has none (or raises)."""
    try:
        return len(dataset)
    except Exception:
        return None


def columns(dataset):
    """The names of a map-style dataset's column tensors (a tensor attribute with one row per
    sample; at least one), sorted; None for a TensorDataset or a dataset without them."""
    import torch
    if isinstance(dataset, torch.utils.data.TensorDataset):
        return None
    if isinstance(dataset, torch.utils.data.IterableDataset) or not hasattr(dataset, "__getitem__"):
        return None
    n = sized(dataset)
    attrs = getattr(dataset, "__dict__", None)
    if not n or not isinstance(attrs, dict):
        return None
    names = sorted(k for k, v in attrs.items()
                   if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == n)
    return names or None


def _columns(dataset):
    names = columns(dataset)
    return None if names is None else [dataset.__dict__[k] for k in names]


def column_items(dataset):
    """``items`` of a dataset's column tensors, or None."""
    return _items_of(_columns(dataset))


def column_content(dataset):
    """``content`` of a dataset's column tensors, or None."""
    return _content_of(_columns(dataset))


def items(dataset):
    """A hex digest of the first, middle and last rows of a TensorDataset, or None."""
    return _items_of(_tensors(dataset))


def _items_of(tensors):
    import torch
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
    return _content_of(_tensors(dataset))


def _content_of(tensors):
    import torch
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
