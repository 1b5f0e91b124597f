"""serve_sampler: a Python Sampler class answers the line protocol as torch's own would."""
import io
import json
import os
import subprocess
import tempfile
import textwrap
import unittest

from torch.utils.data import DistributedSampler

from ddph_audit import serve_sampler
from tests import support


def request(n, w, r, epoch, seed):
    return json.dumps({"dataset_size": n, "num_replicas": w, "rank": r, "epoch": epoch,
                       "seed": seed}) + "\n"


class ServeSamplerTest(unittest.TestCase):
    def test_distributed_sampler_answers_its_own_indices(self):
        out = io.StringIO()
        serve_sampler.serve(DistributedSampler, [request(10, 3, 1, 2, 5)], out)
        expected = DistributedSampler(range(10), num_replicas=3, rank=1, seed=5)
        expected.set_epoch(2)
        self.assertEqual(json.loads(out.getvalue()),
                         {"indices": list(expected), "length": len(expected)})

    def test_a_rejected_request_is_an_error_answer_and_serving_goes_on(self):
        out = io.StringIO()
        serve_sampler.serve(DistributedSampler, [request(4, 2, 5, 0, 0), request(4, 2, 1, 0, 0)],
                            out)
        first, second = [json.loads(l) for l in out.getvalue().splitlines()]
        self.assertIn("ValueError", first["error"])
        self.assertEqual(second["length"], 2)

    def test_a_class_from_a_file_takes_only_the_keywords_it_knows(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "my_sampler.py")
            with open(path, "w") as f:
                f.write(textwrap.dedent("""
                    class ShardSampler:
                        def __init__(self, data, num_replicas, rank):
                            self.idx = list(range(len(data)))[rank::num_replicas]
                        def __iter__(self):
                            return iter(self.idx)
                        def __len__(self):
                            return len(self.idx)
                    """))
            cls = serve_sampler.load_class(path + ":ShardSampler")
            out = io.StringIO()
            serve_sampler.serve(cls, [request(7, 2, 1, 0, 0)], out)
            self.assertEqual(json.loads(out.getvalue()), {"indices": [1, 3, 5], "length": 3})
            self.assertRaisesRegex(ValueError, "has no class Nope", serve_sampler.load_class,
                                   path + ":Nope")

    def test_a_spec_that_cannot_load_is_one_line_and_exit_2(self):
        env = support.base_env()
        env["PYTHONPATH"] = support.PYTHON_DIR
        p = subprocess.run([support.PYTHON, "-m", "ddph_audit.serve_sampler", "nosuch.py:X"],
                           env=env, input="", capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        self.assertIn("nosuch.py does not exist", p.stderr)


    def test_a_class_not_built_as_distributed_sampler_is_is_one_line_and_exit_2(self):
        # A batch sampler that needs lengths and a batch size cannot be built from a request: said
        # at once, not as every property failing on a TypeError.
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bucket.py")
            with open(path, "w") as f:
                f.write(textwrap.dedent("""
                    class BucketBatchSampler:
                        def __init__(self, lengths, batch_size, rank, world_size, seed=0):
                            pass
                    """))
            self.assertEqual(serve_sampler.unbuildable(serve_sampler.load_class(
                path + ":BucketBatchSampler")), ["batch_size", "world_size"])
            env = support.base_env()
            env["PYTHONPATH"] = support.PYTHON_DIR
            p = subprocess.run([support.PYTHON, "-m", "ddph_audit.serve_sampler",
                                path + ":BucketBatchSampler"],
                               env=env, input="", capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        self.assertIn("BucketBatchSampler cannot be built as DistributedSampler is", p.stderr)
        self.assertIn("its constructor also needs batch_size, world_size", p.stderr)

if __name__ == "__main__":
    unittest.main()
