"""launch.json as Python writes it (ddph_audit/launch_record.py, the pytest plugin's) is what the
trace's schema (core/trace/trace_schema.json, "launch_record") and docs/trace-format.md's
"launch.json" section specify: only their keys, each of its type, the required ones always, every
field the schema says Python writes, outcomes and the launcher among the ones the page names; and it
is written whole or not at all. The C++ writer: core/trace/tests/trace_schema_test.cpp."""

import json
import os
import re
import tempfile
import unittest

from ddph_audit import launch_record
from tests import support
from tests.test_trace_schema import field_problems, load_schema

FORMAT_PAGE = os.path.join(os.path.dirname(support.PYTHON_DIR), "docs", "trace-format.md")


def format_section():
    with open(FORMAT_PAGE, encoding="utf-8") as f:
        text = f.read()
    start = text.index("## `launch.json`")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def quoted(text):
    return re.findall(r"`([^`]+)`", text)


class Documented:
    """What the section says: the example (its "…" dropped), the keys its prose names, the
    optional ones, the outcomes and the launchers."""

    def __init__(self):
        section = format_section()
        block = re.search(r"```json\n(.*?)```", section, re.S).group(1)
        self.example = json.loads(re.sub(r",\s*…", "", block))
        prose = section[section.index("```", section.index("```json") + 3) + 3:]
        self.keys = set(self.example) | set(self.example["ranks"][0]) | set(
            self.example["ranks"][1]) | {w for w in quoted(prose) if re.fullmatch(r"[a-z_]+", w)}
        self.optional = set()
        if "`was_stopped` (optional)" in prose:
            self.optional.add("was_stopped")
        if "`deadline_s`, written when" in prose:
            self.optional.add("deadline_s")
        outcomes = re.search(r"`outcome` is one of (.*?)\.\s", prose, re.S).group(1)
        self.outcomes = set(quoted(re.sub(r"\([^()]*\)", "", outcomes)))  # not what explains one
        self.launchers = set(quoted(re.search(r"`launcher` is (.*?)\.\s", prose, re.S).group(1)))
        self.types = {}
        for key, value in list(self.example.items()) + [kv for r in self.example["ranks"]
                                                         for kv in r.items()]:
            self.types[key] = type(value)


def written(record):
    with tempfile.TemporaryDirectory() as folder:
        path = launch_record.write_launch_record(folder, record)
        with open(path, encoding="utf-8") as f:
            return json.load(f)


class LaunchRecordTest(unittest.TestCase):
    def setUp(self):
        self.doc = Documented()
        self.record = launch_record.launch_record("ddph_pytest", 3, 1, True, [
            launch_record.rank_entry(0, 4711, "exited", 1, 0),
            launch_record.rank_entry(1, 4712, "timed-out", 0, 15, was_stopped=True),
            launch_record.rank_entry(2, 4713, "stopped", 0, 15)])

    def test_the_keys_and_types_are_the_documented_ones(self):
        record = written(self.record)
        for key in set(self.doc.example) - self.doc.optional:
            self.assertIn(key, record)
        rank_keys = set(self.doc.example["ranks"][0]) - self.doc.optional
        for rank in record["ranks"]:
            self.assertLessEqual(rank_keys, set(rank))
        for key, value in list(record.items()) + [kv for r in record["ranks"] for kv in r.items()]:
            self.assertIn(key, self.doc.keys)
            if key in self.doc.types:
                self.assertIs(type(value), self.doc.types[key], key)
        self.assertEqual(record["ranks"][1]["was_stopped"], True)
        self.assertNotIn("was_stopped", record["ranks"][0], "optional: only when true")

    def test_the_record_is_the_schemas(self):
        fields = load_schema()["launch_record"]["fields"]
        record = written(self.record)
        self.assertEqual(field_problems(fields, record, "launch.json"), [])
        self.assertEqual(load_schema()["launch_record"]["file"], launch_record.LAUNCH_RECORD)
        for f in fields:  # every field the schema says Python writes, once in this record
            if "python" not in f["producers"]:
                continue
            self.assertIn(f["name"], record)
            for e in f.get("entries", []):
                if "python" in e["producers"]:
                    self.assertTrue(any(e["name"] in r for r in record[f["name"]]), e["name"])
        self.assertEqual(len(field_problems(fields, dict(record, world_size="3"), "x")), 1)

    def test_the_page_names_every_field_of_the_schema(self):
        fields = load_schema()["launch_record"]["fields"]
        names = [f["name"] for f in fields] + [e["name"] for f in fields for e in f.get("entries", [])]
        for name in names:
            self.assertIn(name, self.doc.keys, "docs/trace-format.md's launch.json section")

    def test_outcomes_and_the_launcher_are_among_the_documented_ones(self):
        self.assertEqual(set(launch_record.OUTCOMES), self.doc.outcomes)
        self.assertIn(self.record["launcher"], self.doc.launchers)
        with self.assertRaises(ValueError):
            launch_record.rank_entry(0, 1, "hung", 0, 0)

    def test_written_whole_or_not_at_all(self):
        with tempfile.TemporaryDirectory() as folder:
            path = launch_record.write_launch_record(folder, self.record)
            before = open(path).read()
            with self.assertRaises(TypeError):  # not JSON: nothing replaced, nothing left
                launch_record.write_launch_record(folder, dict(self.record, world_size=object()))
            self.assertEqual(open(path).read(), before)
            self.assertEqual(os.listdir(folder), [launch_record.LAUNCH_RECORD])


if __name__ == "__main__":
    unittest.main()
