import pathlib
import unittest

from ddph_audit import dataset_fingerprint


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


if __name__ == "__main__":
    unittest.main()
