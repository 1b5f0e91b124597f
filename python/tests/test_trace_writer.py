import json
import os
import tempfile
import threading
import unittest

from ddph_audit.trace_writer import TraceWriter


def lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


class TraceWriterTest(unittest.TestCase):
    def test_header_first_then_queued_events(self):
        with tempfile.TemporaryDirectory() as d:
            w = TraceWriter(os.path.join(d, "trace"))
            w.emit("sampler", {"id": 0})
            self.assertFalse(w.is_open)
            w.open(3, {"trace": "ddph-audit", "version": 1, "rank": 3})
            w.emit("end", {"code": 0})
            w.close()
            evs = lines(os.path.join(d, "trace", "rank-3.jsonl"))
            self.assertEqual([e["ev"] for e in evs], ["header", "sampler", "end"])
            self.assertEqual(evs[0]["t"], 0.0)
            self.assertEqual(evs[1]["id"], 0)
            self.assertTrue(all(isinstance(e["t"], float) for e in evs))
            self.assertLessEqual(evs[1]["t"], evs[2]["t"])

    def test_each_line_is_flushed_at_once(self):
        with tempfile.TemporaryDirectory() as d:
            w = TraceWriter(d)
            w.open(0, {"rank": 0})
            w.emit("batch", {"seq": 0})
            # Read through another file object while the writer is still open.
            self.assertEqual([e["ev"] for e in lines(os.path.join(d, "rank-0.jsonl"))],
                             ["header", "batch"])
            w.close()

    def test_threads_never_interleave_lines(self):
        with tempfile.TemporaryDirectory() as d:
            w = TraceWriter(d)
            w.open(1, {"rank": 1})

            def work(k):
                for i in range(500):
                    w.emit("coll", {"thread": k, "seq": i, "pad": "x" * 200})

            threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            w.close()
            evs = lines(os.path.join(d, "rank-1.jsonl"))
            self.assertEqual(len(evs), 1 + 8 * 500)
            for k in range(8):
                self.assertEqual([e["seq"] for e in evs if e.get("thread") == k], list(range(500)))

    def test_forked_child_writes_nothing(self):
        if not hasattr(os, "fork"):
            self.skipTest("no fork")
        with tempfile.TemporaryDirectory() as d:
            w = TraceWriter(d)
            w.open(0, {"rank": 0})
            pid = os.fork()
            if pid == 0:  # child
                try:
                    w.emit("batch", {"from": "child"})
                    w.close()
                finally:
                    os._exit(0)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(status, 0)
            w.emit("end", {"code": 0})
            w.close()
            self.assertEqual([e["ev"] for e in lines(os.path.join(d, "rank-0.jsonl"))],
                             ["header", "end"])

    def test_exclusive_open_refuses_an_existing_file(self):
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "rank-0.jsonl"), "w").close()
            w = TraceWriter(d)
            with self.assertRaises(FileExistsError):
                w.open(0, {"rank": 0}, exclusive=True)


if __name__ == "__main__":
    unittest.main()
