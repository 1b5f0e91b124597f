import pathlib
import unittest

import torch
from torch.utils.data import ConcatDataset, TensorDataset

from ddph_audit import dataset_fingerprint, dataset_items


class Folder:
    """A dataset that keeps its file listing, as torchvision's ImageFolder keeps ``samples``."""

    def __init__(self, files, attribute="files"):
        setattr(self, attribute, files)

    def __len__(self):
        return len(getattr(self, "files", getattr(self, "samples", [])))

    def __getitem__(self, i):
        raise AssertionError("the fingerprint must never load a sample")


class Lazy:
    """A listing behind a property may compute or load: it is not read."""

    @property
    def files(self):
        raise AssertionError("read")


class Subset:
    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, indices


class DatasetFingerprintTest(unittest.TestCase):
    def test_same_listing_same_fingerprint_another_order_another(self):
        a = dataset_fingerprint.fingerprint(Folder(["a.png", "b.png", "c.png"]))
        self.assertEqual(a, dataset_fingerprint.fingerprint(Folder(["a.png", "b.png", "c.png"])))
        self.assertNotEqual(a, dataset_fingerprint.fingerprint(Folder(["b.png", "a.png", "c.png"])))
        self.assertTrue(a.startswith("files:"))

    def test_imagefolder_samples_and_paths(self):
        samples = [(pathlib.Path("x/1.png"), 0), (pathlib.Path("x/2.png"), 1)]
        f = dataset_fingerprint.fingerprint(Folder(samples, attribute="samples"))
        self.assertTrue(f.startswith("samples:"))
        self.assertNotEqual(f, dataset_fingerprint.fingerprint(
            Folder(list(reversed(samples)), attribute="samples")))

    def test_subset_follows_its_dataset_and_indices(self):
        base = Folder(["a", "b", "c", "d"])
        f = dataset_fingerprint.fingerprint(Subset(base, [0, 2]))
        self.assertTrue(f.startswith("subset:"))
        self.assertNotEqual(f, dataset_fingerprint.fingerprint(Subset(base, [2, 0])))

    def test_nothing_known_gives_none(self):
        self.assertIsNone(dataset_fingerprint.fingerprint(Lazy()))
        self.assertIsNone(dataset_fingerprint.fingerprint(Folder([1, 2, 3])))  # not a listing
        self.assertIsNone(dataset_fingerprint.fingerprint(object()))


class Guarded(TensorDataset):
    """A TensorDataset whose items must never be read through __getitem__ (it would augment)."""

    def __getitem__(self, i):
        raise AssertionError("the fingerprint must never call __getitem__")


def data(n=100, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return x, (x[:, 0] > 0).long()


class DatasetItemsTest(unittest.TestCase):
    def test_same_tensors_same_items_and_content(self):
        a, b = Guarded(*data()), Guarded(*data())
        self.assertEqual(dataset_items.items(a), dataset_items.items(b))
        self.assertEqual(dataset_items.content(a), dataset_items.content(b))

    def test_another_order_other_items_same_content(self):
        x, y = data()
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(1))
        a, b = TensorDataset(x, y), TensorDataset(x[order], y[order])
        self.assertNotEqual(dataset_items.items(a), dataset_items.items(b))
        self.assertEqual(dataset_items.content(a), dataset_items.content(b))

    def test_other_samples_other_items_and_content(self):
        x, y = data()
        a, b = TensorDataset(x[:50], y[:50]), TensorDataset(x[50:], y[50:])
        self.assertNotEqual(dataset_items.items(a), dataset_items.items(b))
        self.assertNotEqual(dataset_items.content(a), dataset_items.content(b))

    def test_reading_draws_nothing_and_builds_no_graph(self):
        x, y = data()
        x.requires_grad_(True)
        state = torch.get_rng_state()
        dataset_fingerprint.describe(Guarded(x, y))
        self.assertTrue(torch.equal(state, torch.get_rng_state()))
        self.assertIsNone(x.grad_fn)

    def test_dtypes_without_numpy_twins_and_bools(self):
        d = TensorDataset(torch.ones(3, 2, dtype=torch.bfloat16), torch.tensor([True, False, True]))
        self.assertIsNotNone(dataset_items.items(d))
        self.assertIsNotNone(dataset_items.content(d))

    def test_content_is_skipped_past_its_limit(self):
        limit = dataset_items.CONTENT_LIMIT
        dataset_items.CONTENT_LIMIT = 100
        try:
            d = TensorDataset(*data())
            self.assertIsNone(dataset_items.content(d))
            self.assertIsNotNone(dataset_items.items(d))
        finally:
            dataset_items.CONTENT_LIMIT = limit

    def test_other_datasets_have_no_items(self):
        self.assertIsNone(dataset_items.items(Folder(["a", "b"])))
        self.assertIsNone(dataset_items.content(object()))


class ConcatPartsTest(unittest.TestCase):
    def part(self, name, seed, n=30):
        d = TensorDataset(*data(n, seed))
        d.name = name
        return d

    def test_parts_in_order_with_their_names_lengths_and_items(self):
        a, b = self.part("news", 1), self.part("code", 2, n=20)
        parts = dataset_fingerprint.parts(ConcatDataset([a, b]))
        self.assertEqual([(p["dataset"], p["name"], p["len"]) for p in parts],
                         [("TensorDataset", "news", 30), ("TensorDataset", "code", 20)])
        swapped = dataset_fingerprint.parts(ConcatDataset([b, a]))
        self.assertEqual(parts, list(reversed(swapped)))
        self.assertIn("items", parts[0])
        self.assertIn("content", parts[0])

    def test_a_path_name_keeps_its_file_name_only(self):
        d = Folder(["a.png"])
        d.path = pathlib.Path("data") / "shards" / "part-3.pt"
        parts = dataset_fingerprint.parts(ConcatDataset([d]))
        self.assertEqual(parts[0]["name"], "part-3.pt")
        self.assertTrue(parts[0]["fingerprint"].startswith("files:"))

    def test_describe_gives_the_loader_fields(self):
        fields = dataset_fingerprint.describe(ConcatDataset([self.part("a", 1), self.part("b", 2)]))
        self.assertEqual(sorted(fields), ["dataset_parts"])
        fields = dataset_fingerprint.describe(TensorDataset(*data()))
        self.assertEqual(sorted(fields), ["dataset_content", "dataset_items"])
        self.assertEqual(dataset_fingerprint.describe(Lazy()), {})


if __name__ == "__main__":
    unittest.main()
