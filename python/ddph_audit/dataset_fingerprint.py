"""A fingerprint of the order in which a dataset lists its samples.

Ranks that build their dataset from their own file listing (``os.listdir``, ``glob``: their order
is not defined) may hold the same files in different orders: index i then names a different
sample on each rank, and DistributedSampler's shards overlap and leave samples out although every
rank's indices are right. The verifier compares this fingerprint across ranks.

Only cheap, side-effect-free attributes are read: the first of the well-known listing attributes
(torchvision's ``samples``/``imgs``, and the usual ``files``, ``paths``, …) that is a list or tuple
of strings, paths or tuples of them. ``__getitem__`` is never called. Subset and ConcatDataset are
followed to the datasets they wrap.
"""
import hashlib
import os

_LISTINGS = ("samples", "imgs", "files", "file_list", "filenames", "file_names", "paths",
             "image_paths", "img_paths", "image_files", "items")
_LIMIT = 10_000_000


def _entry(x):
    if isinstance(x, (str, os.PathLike)):
        return os.fspath(x)
    if isinstance(x, tuple) and x and isinstance(x[0], (str, os.PathLike)):
        return "\t".join(os.fspath(v) if isinstance(v, (str, os.PathLike)) else repr(v) for v in x)
    return None


def _listing(dataset):
    for name in _LISTINGS:
        value = getattr(type(dataset), name, None)
        if isinstance(value, property):
            continue  # may compute or load: not read
        value = dataset.__dict__.get(name) if hasattr(dataset, "__dict__") else None
        if isinstance(value, (list, tuple)) and value and len(value) <= _LIMIT:
            first = _entry(value[0])
            if first is not None:
                return name, value
    return None, None


def _sized(dataset):
    try:
        return len(dataset)
    except Exception:
        return None


def fingerprint(dataset, depth=0):
    """'<attribute>:<hex>' for the dataset's listing, or None when it exposes none."""
    if depth > 4 or dataset is None:
        return None
    inner = getattr(dataset, "dataset", None)  # Subset
    indices = getattr(dataset, "indices", None)
    if inner is not None and indices is not None:
        sub = fingerprint(inner, depth + 1)
        h = hashlib.blake2b((sub or "").encode(), digest_size=12)
        h.update(repr(list(indices)[:_LIMIT]).encode())
        if sub is None:  # a base with no listing: the split itself (random_split's indices)
            h.update(repr(_sized(inner)).encode())
            return "subset-indices:" + h.hexdigest()
        return "subset:" + h.hexdigest()
    parts = getattr(dataset, "datasets", None)  # ConcatDataset
    if isinstance(parts, (list, tuple)) and parts:
        subs = [fingerprint(d, depth + 1) for d in parts]
        if all(s is None for s in subs):
            return None
        return "concat:" + hashlib.blake2b("|".join(map(str, subs)).encode(),
                                           digest_size=12).hexdigest()
    name, value = _listing(dataset)
    if value is None:
        return None
    h = hashlib.blake2b(digest_size=12)
    for x in value:
        e = _entry(x)
        h.update((e if e is not None else repr(x)).encode("utf-8", "replace"))
        h.update(b"\n")
    return "%s:%s" % (name, h.hexdigest())
