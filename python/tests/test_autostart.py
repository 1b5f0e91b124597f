"""The sitecustomize entry: chains the sitecustomize it shadows, and costs nothing (no torch
import, no file) in a process that never imports torch."""
import json
import os
import subprocess
import tempfile
import unittest

from ddph_audit import environment
from tests import support


class AutostartTest(unittest.TestCase):
    def run_python(self, code, extra_path, trace_dir):
        env = support.base_env()
        env["PYTHONPATH"] = os.pathsep.join([support.SITECUSTOMIZE_DIR, support.PYTHON_DIR]
                                            + extra_path)
        if trace_dir is not None:
            env[environment.AUDIT_DIR] = trace_dir
            env["RANK"] = "0"
        return subprocess.run([support.PYTHON, "-c", code], env=env, capture_output=True,
                               text=True, timeout=60)

    def test_chains_the_shadowed_sitecustomize(self):
        with tempfile.TemporaryDirectory() as d:
            other = os.path.join(d, "other")
            os.mkdir(other)
            with open(os.path.join(other, "sitecustomize.py"), "w") as f:
                f.write("import builtins\nbuiltins.OTHER_SITECUSTOMIZE_RAN = True\n")
            r = self.run_python("import builtins; print(getattr(builtins, "
                                "'OTHER_SITECUSTOMIZE_RAN', False))", [other],
                                os.path.join(d, "trace"))
            self.assertEqual((r.returncode, r.stdout.strip(), r.stderr), (0, "True", ""))

    def test_nothing_without_torch(self):
        with tempfile.TemporaryDirectory() as d:
            trace = os.path.join(d, "trace")
            r = self.run_python("import sys, json; print(json.dumps(sorted(m for m in "
                                "sys.modules if m.startswith(('torch', 'ddph_audit.')))))",
                                [], trace)
            self.assertEqual(r.returncode, 0, r.stderr)
            loaded = json.loads(r.stdout)
            # Only the import hook is there (and the names it reads): no torch, no recorder, no
            # instrumentor.
            self.assertEqual([m for m in loaded if not m.startswith("ddph_audit.")], [])
            self.assertLessEqual(set(loaded), {"ddph_audit.registry", "ddph_audit.import_hook",
                                               "ddph_audit.environment"})
            self.assertFalse(os.path.exists(trace))

    def test_records_once_torch_is_imported(self):
        with tempfile.TemporaryDirectory() as d:
            trace = os.path.join(d, "trace")
            r = self.run_python("import torch.utils.data as D\n"
                                "for b in D.DataLoader(list(range(5)), batch_size=2): pass\n",
                                [], trace)
            self.assertEqual(r.returncode, 0, r.stderr)
            evs = support.read_trace(os.path.join(trace, "rank-0.jsonl"))
            self.assertEqual([e["ev"] for e in evs],
                             ["header", "sampler", "loader", "epoch", "batch", "batch", "batch",
                              "epoch_end", "end"])
            self.assertEqual(evs[1]["order"], "sequential")
            self.assertNotIn("idx", evs[4])

    def test_without_trace_dir_nothing_is_installed(self):
        r = self.run_python("import sys; print(any(type(f).__module__.startswith('ddph_audit') "
                            "for f in sys.meta_path))", [], None)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "False"), r.stderr)


if __name__ == "__main__":
    unittest.main()
