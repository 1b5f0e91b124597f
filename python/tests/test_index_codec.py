import base64
import random
import struct
import unittest

from ddph_audit import index_codec


class IndexCodecTest(unittest.TestCase):
    def round_trip(self, values):
        encoded = index_codec.encode(values)
        self.assertEqual(index_codec.decode(encoded), list(values))
        return encoded

    def test_short_list_is_a_json_array(self):
        self.assertEqual(self.round_trip([5, 3, 9]), [5, 3, 9])
        self.assertEqual(self.round_trip([]), [])

    def test_consecutive_runs(self):
        self.assertEqual(self.round_trip(list(range(1000))), {"runs": [[0, 1000]]})
        self.assertEqual(self.round_trip(list(range(10, 20)) + list(range(50, 60))),
                         {"runs": [[10, 10], [50, 10]]})

    def test_long_irregular_list_is_i64_little_endian(self):
        rng = random.Random(1)
        values = [rng.randrange(-2**40, 2**40) for _ in range(1000)]
        encoded = self.round_trip(values)
        self.assertEqual(set(encoded), {"i64"})
        raw = base64.b64decode(encoded["i64"])
        self.assertEqual(list(struct.unpack("<%dq" % len(values), raw)), values)

    def test_random_round_trips(self):
        rng = random.Random(2)
        for n in (1, 2, 4, 7, 64, 255, 256, 257, 3000):
            values = [rng.randrange(0, 100) for _ in range(n)]
            self.round_trip(values)
            self.round_trip(sorted(set(values)))

    def test_to_int_list(self):
        import torch
        self.assertEqual(index_codec.to_int_list(range(3)), [0, 1, 2])
        self.assertEqual(index_codec.to_int_list(7), [7])
        self.assertEqual(index_codec.to_int_list(torch.tensor([4, 5])), [4, 5])
        self.assertEqual(index_codec.to_int_list([torch.tensor(1), 2]), [1, 2])
        with self.assertRaises((TypeError, ValueError)):
            index_codec.to_int_list(["a", "b"])

    def test_decode_rejects_garbage(self):
        with self.assertRaises(ValueError):
            index_codec.decode({"x": 1})
        with self.assertRaises(ValueError):
            index_codec.decode({"i64": base64.b64encode(b"123").decode()})


if __name__ == "__main__":
    unittest.main()
