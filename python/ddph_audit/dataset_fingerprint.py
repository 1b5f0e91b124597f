"""A fingerprint of the order in which a dataset lists its samples.

Ranks that build their dataset from their own file listing (``os.listdir``, ``glob``: their order
is not defined) may hold the same files in different orders: index i then names a different
sample on each rank, and DistributedSampler's shards overlap and leave samples out although every
rank's indices are right. The verifier compares this fingerprint across ranks.

Only cheap, side-effect-free attributes are read: the first of the well-known listing attributes
(torchvision's ``samples``/``imgs``, and the usual ``files``, ``paths``, …) that is a list or tuple
of strings, paths or tuples of them. ``__getitem__`` is never called. Subset and ConcatDataset are
followed to the datasets they wrap.

``describe`` gives every field of the loader line about its dataset: this listing fingerprint, a
TensorDataset's items and content (``dataset_items``), and a ConcatDataset's parts in their order,
each with its class, length, listing, items and name, so that ranks composed of other parts, of
the same parts in another order, or of parts of other lengths can be told apart and named.
"""
import hashlib
import os

from . import dataset_items, index_codec

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
            h.update(repr(dataset_items.sized(inner)).encode())
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


_NAMES = ("name", "split", "source", "path", "file", "filename", "root")
_NAME_CHARS = 80


def _name(dataset):
    """A short name the program gave the dataset (its ``name``, ``path``, … string), or None."""
    fields = getattr(dataset, "__dict__", None) or {}
    for attribute in _NAMES:
        value = fields.get(attribute)
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if isinstance(value, str) and value:
            base = os.path.basename(value.rstrip("/\\")) or value  # a file name, never a machine path
            return base[:_NAME_CHARS]
    return None


def _identity(dataset):
    """The fields that tell this dataset apart from another: listing, items, content."""
    out = {}
    for key, read in (("fingerprint", fingerprint), ("items", dataset_items.items),
                      ("content", dataset_items.content)):
        value = _read(read, dataset)
        if value is not None:
            out[key] = value
    return out


_MAX_PARTS = 256


def parts(dataset):
    """A ConcatDataset's parts in order: [{"dataset", "len", "name"?, "fingerprint"?, "items"?,
    "content"?}, …], or None for another dataset."""
    found = getattr(dataset, "datasets", None)
    if not isinstance(found, (list, tuple)) or not found or len(found) > _MAX_PARTS:
        return None
    if getattr(dataset, "cumulative_sizes", None) is None:  # not torch's ConcatDataset shape
        return None
    out = []
    for part in found:
        entry = {"dataset": type(part).__name__, "len": dataset_items.sized(part)}
        name = _name(part)
        if name is not None:
            entry["name"] = name
        entry.update(_identity(part))
        out.append(entry)
    return out


def _read(read, dataset):
    try:
        return read(dataset)
    except Exception:  # a dataset's attributes are the program's business: never fail on them
        return None


def describe(dataset):
    """The loader line's fields about ``dataset`` (trace-format.md, ``loader``): only those known."""
    fields = {}
    for key, read in (("dataset_fingerprint", fingerprint), ("dataset_items", dataset_items.items),
                      ("dataset_content", dataset_items.content), ("dataset_parts", parts),
                      ("dataset_columns", dataset_items.columns),
                      ("column_items", dataset_items.column_items),
                      ("column_content", dataset_items.column_content)):
        value = _read(read, dataset)
        if value is not None:
            fields[key] = value
    split = _read(subset_split, dataset)
    if split is not None:
        fields["subset_of"], fields["subset_indices"] = split
    return fields


_SUBSET_LIMIT = 1 << 22


def subset_split(dataset):
    """(length of the base, the indices' index list) of a ``Subset`` whose indices are integers
    (up to 2^22 of them), else None: what tells a rank's shard of one base from another's."""
    inner = getattr(dataset, "dataset", None)
    indices = getattr(dataset, "indices", None)
    if inner is None or indices is None:
        return None
    base = dataset_items.sized(inner)
    if base is None or dataset_items.sized(indices) is None or len(indices) > _SUBSET_LIMIT:
        return None
    values = index_codec.to_int_list(indices)
    if values is None:
        return None
    return base, index_codec.encode(values)
