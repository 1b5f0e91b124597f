"""--stand-in-data in one process: torchvision's MNIST from the harness's real files, CIFAR-10/100
and FashionMNIST as stand-ins with the real lengths, shapes and classes, an unknown dataset's
download refused in one line, and an uninstrument that leaves torchvision as it was."""

import os
import tempfile
import unittest

try:
    import torchvision.datasets as datasets
except ImportError:  # python3-torchvision is installed by scripts/install-deps.sh
    datasets = None

from ddph_audit import environment
from ddph_emulation.stand_in_data import MNIST_FILES, StandInDataInstrumentor

HERE = os.path.dirname(os.path.abspath(__file__))
MNIST_DIR = os.environ.get(environment.MNIST_DIR) or os.path.join(HERE, "..", "..", "data", "mnist")


@unittest.skipIf(datasets is None, "torchvision is not installed")
class StandInData(unittest.TestCase):
    def setUp(self):
        self.before = {c: dict(vars(c)) for c in (datasets.MNIST, datasets.CIFAR10, datasets.CIFAR100)}
        self.stand_in = StandInDataInstrumentor(mnist_dir=MNIST_DIR)
        self.stand_in.instrument()
        self.root = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.stand_in.uninstrument()
        self.root.cleanup()

    def test_cifar10_has_the_real_lengths_shapes_and_classes(self):
        train = datasets.CIFAR10(self.root.name, train=True, download=True)
        test = datasets.CIFAR10(self.root.name, train=False, download=True)
        self.assertEqual((len(train), len(test)), (50000, 10000))
        img, label = train[49999]
        self.assertEqual(img.size, (32, 32))
        self.assertEqual(img.mode, "RGB")
        self.assertEqual(len(train.classes), 10)
        self.assertEqual(train.classes[0], "airplane")
        counts = [0] * 10
        for t in train.targets:
            counts[t] += 1
        self.assertEqual(counts, [5000] * 10)
        self.assertEqual(list(datasets.CIFAR10(self.root.name)[7][0].getdata())[:5],
                         list(train[7][0].getdata())[:5])  # the same pixels every time
        self.assertEqual(os.listdir(self.root.name), [])  # nothing written into the user's folder
        self.assertEqual(len(datasets.CIFAR100(self.root.name).classes), 100)

    def test_fashion_mnist_is_a_stand_in_of_the_real_size(self):
        ds = datasets.FashionMNIST(self.root.name, train=False, download=True)
        self.assertEqual(len(ds), 10000)
        self.assertEqual(ds[0][0].size, (28, 28))

    @unittest.skipUnless(all(os.path.isfile(os.path.join(MNIST_DIR, f)) for f in MNIST_FILES),
                         "no MNIST files (scripts/fetch-mnist.sh)")
    def test_mnist_is_read_from_the_real_files(self):
        ds = datasets.MNIST(self.root.name, train=True, download=True)
        self.assertEqual(len(ds), 60000)
        self.assertEqual(int(ds.targets[0]), 5)  # the first MNIST training image is a 5
        self.assertEqual(os.listdir(self.root.name), [])

    def test_an_unknown_dataset_gets_one_line(self):
        with self.assertRaisesRegex(RuntimeError, r"has no stand-in .* \(covered: MNIST"):
            datasets.SVHN(self.root.name, download=True)

    def test_uninstrument_leaves_torchvision_as_it_was(self):
        self.stand_in.uninstrument()
        for cls, old in self.before.items():
            self.assertEqual(dict(vars(cls)), old, cls)
        self.stand_in.instrument()


if __name__ == "__main__":
    unittest.main()
