import errno
import json
import os
import tempfile
import threading
import unittest

from ddph_audit import trace_writer
from ddph_audit.trace_writer import TraceWriter

from tests import support


class TraceWriterTest(unittest.TestCase):
    def test_header_first_then_queued_events(self):
        with tempfile.TemporaryDirectory() as d:
            w = TraceWriter(os.path.join(d, "trace"))
            w.emit("sampler", {"id": 0})
            self.assertFalse(w.is_open)
            w.open(3, {"trace": "ddph-audit", "version": 1, "rank": 3})
            w.emit("end", {"code": 0})
            w.close()
            evs = support.read_trace(os.path.join(d, "trace", "rank-3.jsonl"))
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
            self.assertEqual([e["ev"] for e in support.read_trace(os.path.join(d, "rank-0.jsonl"))],
                             ["header", "batch"])
            w.close()

    def test_file_grows_by_reserved_chunks_and_is_cut_to_its_lines_when_closed(self):
        with tempfile.TemporaryDirectory() as d:
            w = TraceWriter(d)
            w.open(0, {"rank": 0})
            path = os.path.join(d, "rank-0.jsonl")
            self.assertEqual(os.path.getsize(path), trace_writer.CHUNK_MIN)
            pad = "x" * 1000
            n = 3 * trace_writer.CHUNK_MIN // 1000  # lines past two more chunks
            for i in range(n):
                w.emit("batch", {"seq": i, "pad": pad})
            self.assertGreater(os.path.getsize(path), 3 * trace_writer.CHUNK_MIN)
            w.emit_many([("coll", {"seq": 0, "pad": "y" * 3 * trace_writer.CHUNK_MIN})])  # > a chunk
            w.close()
            with open(path, "rb") as f:
                data = f.read()
            self.assertNotIn(b"\0", data)
            self.assertTrue(data.endswith(b"}\n"))
            evs = [json.loads(line) for line in data.splitlines()]
            self.assertEqual([e.get("seq") for e in evs[1:-1]], list(range(n)))
            self.assertEqual(len(evs[-1]["pad"]), 3 * trace_writer.CHUNK_MIN)

    def test_a_file_never_closed_ends_in_nul_bytes_after_its_last_line(self):
        # What a SIGKILLed rank leaves (the kill itself: audit_launch.AuditPython.SigkilledRankTraceIsRead).
        with tempfile.TemporaryDirectory() as d:
            pid = os.fork()
            if pid == 0:  # child: writes two lines and dies without closing
                try:
                    w = TraceWriter(d)
                    w.open(0, {"rank": 0})
                    w.emit("batch", {"seq": 0})
                finally:
                    os._exit(0)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(status, 0)
            with open(os.path.join(d, "rank-0.jsonl"), "rb") as f:
                data = f.read()
            lines_part, nul, tail = data.partition(b"\0")
            self.assertEqual(nul, b"\0")
            self.assertEqual(tail.strip(b"\0"), b"")
            self.assertEqual([json.loads(x)["ev"] for x in lines_part.splitlines()], ["header", "batch"])

    def test_reopening_a_rank_file_leaves_a_process_still_writing_the_old_one_its_own(self):
        with tempfile.TemporaryDirectory() as d:
            old = TraceWriter(d)
            old.open(0, {"rank": 0, "run": "old"})
            new = TraceWriter(d)
            new.open(0, {"rank": 0, "run": "new"})  # unlinks, never truncates, the old file
            old.emit("batch", {"seq": 0})  # stores into the old, unlinked file: no SIGBUS
            new.emit("end", {"code": 0})
            old.close()
            new.close()
            self.assertEqual([(e["ev"], e.get("run")) for e in support.read_trace(os.path.join(d, "rank-0.jsonl"))],
                             [("header", "new"), ("end", None)])

    def test_a_file_system_that_cannot_map_the_file_gets_plain_writes(self):
        real = trace_writer.mmap.mmap

        def refuse(*args, **kwargs):
            raise OSError(errno.ENODEV, "No such device")

        trace_writer.mmap.mmap = refuse
        try:
            with tempfile.TemporaryDirectory() as d:
                w = TraceWriter(d)
                w.emit("sampler", {"id": 0})  # queued before the file opens
                w.open(0, {"rank": 0})
                w.emit("batch", {"seq": 0})
                self.assertEqual([e["ev"] for e in support.read_trace(os.path.join(d, "rank-0.jsonl"))],
                                 ["header", "sampler", "batch"])  # each line written at once
                w.emit_line(trace_writer.line_format("coll_done", {"seq": trace_writer.INT}), (4,))
                # A store that took the queue just before the file opened: written, not queued.
                w._queue(b'{"ev":"late","t":0.5}\n')
                w.close()
                with open(os.path.join(d, "rank-0.jsonl"), "rb") as f:
                    data = f.read()
                self.assertNotIn(b"\0", data)
                self.assertEqual([json.loads(x)["ev"] for x in data.splitlines()],
                                 ["header", "sampler", "batch", "coll_done", "late"])
        finally:
            trace_writer.mmap.mmap = real

    def test_a_full_disk_fails_the_store_and_keeps_the_lines_written(self):
        real = trace_writer._reserve
        with tempfile.TemporaryDirectory() as d:
            w = TraceWriter(d)
            w.open(0, {"rank": 0})
            w.emit("batch", {"seq": 0})

            def full(*args):
                raise OSError(errno.ENOSPC, "No space left on device")

            trace_writer._reserve = full
            try:
                with self.assertRaises(OSError):  # the recorder disables itself on it
                    w.emit("batch", {"seq": 1, "pad": "x" * (2 * trace_writer.CHUNK_MIN)})
            finally:
                trace_writer._reserve = real
            w.close()
            with open(os.path.join(d, "rank-0.jsonl"), "rb") as f:
                data = f.read()
            self.assertEqual([json.loads(x).get("seq") for x in data.splitlines()], [None, 0])

    def test_threads_never_interleave_lines(self):
        with tempfile.TemporaryDirectory() as d:
            w = TraceWriter(d)
            w.open(1, {"rank": 1})

            fmt = trace_writer.line_format("coll", {"thread": trace_writer.INT,
                                                    "seq": trace_writer.INT, "pad": "y" * 400})

            def work(k):  # past the first reserved chunk, growing it while others write
                for i in range(500):
                    if i % 2:
                        w.emit_line(fmt, (k, i))
                    else:
                        w.emit("coll", {"thread": k, "seq": i, "pad": "x" * 400})

            threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            w.close()
            evs = support.read_trace(os.path.join(d, "rank-1.jsonl"))
            self.assertEqual(len(evs), 1 + 8 * 500)
            for k in range(8):
                self.assertEqual([e["seq"] for e in evs if e.get("thread") == k], list(range(500)))

    def test_line_formats_write_what_the_encoding_of_the_event_writes(self):
        fields = {"loader": 3, "name": 'a "quoted" 100% \\ \u00e9\n', "seq": trace_writer.INT,
                  "grad": trace_writer.FLAG, "list": [1, "%s"], "none": None}
        fmt = trace_writer.line_format("batch", fields)
        with tempfile.TemporaryDirectory() as d:
            w = TraceWriter(d)
            w.open(0, {"rank": 0})
            w.emit_line(fmt, (7, trace_writer.JSON_BOOL[False]))
            w.emit_lines([(fmt, (8, trace_writer.JSON_BOOL[True]))] * 2)
            w.close()
            evs = support.read_trace(os.path.join(d, "rank-0.jsonl"))
        expected = dict(fields, ev="batch")
        self.assertEqual([dict(e, t=None) for e in evs[1:]],
                         [dict(expected, seq=7, grad=False, t=None),
                          dict(expected, seq=8, grad=True, t=None),
                          dict(expected, seq=8, grad=True, t=None)])
        self.assertEqual(evs[2]["t"], evs[3]["t"])  # one time for the lines written at once
        self.assertTrue(all(isinstance(e["t"], float) for e in evs))

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
            self.assertEqual([e["ev"] for e in support.read_trace(os.path.join(d, "rank-0.jsonl"))],
                             ["header", "end"])

    def test_exclusive_open_refuses_an_existing_file(self):
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "rank-0.jsonl"), "w").close()
            w = TraceWriter(d)
            with self.assertRaises(FileExistsError):
                w.open(0, {"rank": 0}, exclusive=True)


if __name__ == "__main__":
    unittest.main()
