"""The trace schema (core/trace/trace_schema.json) against what spells it elsewhere: the recorder's
constants (ddph_audit.trace_events), the format page (docs/trace-format.md), and the lines the
recorder really writes (every line of two audited programs is an event of the schema, with the
schema's fields and types). The C++ side is generated from the schema (cmake/DdphTraceSchema.cmake)
and its writer checked by core/trace/tests/trace_schema_test.cpp."""
import json
import os
import re
import tempfile
import unittest

from ddph_audit import trace_events
from tests import support

ROOT = os.path.dirname(support.PYTHON_DIR)
SCHEMA_PATH = os.path.join(ROOT, "core", "trace", "trace_schema.json")
FORMAT_PAGE = os.path.join(ROOT, "docs", "trace-format.md")


def load_schema():
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        return json.load(f)


def events_by_name(schema):
    return {e["name"]: e for e in schema["events"]}


def type_matches(kind, value):
    """Whether ``value`` (parsed JSON) has the schema type ``kind``."""
    is_int = isinstance(value, int) and not isinstance(value, bool)
    checks = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: is_int,
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "integer-list": lambda v: isinstance(v, list) and all(
            isinstance(x, int) and not isinstance(x, bool) for x in v),
        "string-list": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "number-list": lambda v: isinstance(v, list) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in v),
        "index-list": lambda v: isinstance(v, (list, dict)),
        "object": lambda v: isinstance(v, dict),
        "object-list": lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v),
    }
    return checks[kind](value)


def field_problems(fields, obj, where):
    """What in ``obj`` disagrees with the schema's ``fields``: unknown keys, missing required
    ones, values of another type (null only where nullable); nested entries too."""
    known = {f["name"]: f for f in fields}
    problems = ["%s: field %r is not in the schema" % (where, k) for k in obj if k not in known]
    for name, f in known.items():
        if name not in obj:
            if f["required"]:
                problems.append("%s: required field %r is missing" % (where, name))
            continue
        value = obj[name]
        if value is None and f.get("nullable"):
            continue
        if not type_matches(f["type"], value):
            problems.append("%s: %r = %r is not a %s" % (where, name, value, f["type"]))
        elif "entries" in f:
            for i, entry in enumerate(value):
                problems += field_problems(f["entries"], entry, "%s %s[%d]" % (where, name, i))
    return problems


def line_problems(schema, line, where):
    event = events_by_name(schema).get(line.get("ev"))
    if event is None:
        return ["%s: event %r is not in the schema" % (where, line.get("ev"))]
    return field_problems(schema["common_fields"] + event["fields"], line,
                          "%s (%s)" % (where, event["name"]))


class SchemaTest(unittest.TestCase):
    def test_schema_is_well_formed(self):
        schema = load_schema()
        producers = set(schema["producers"])
        names = [e["name"] for e in schema["events"]]
        self.assertEqual(len(names), len(set(names)), "an event is defined twice")
        for event in schema["events"]:
            self.assertTrue(event["meaning"], event["name"])
            self.assertLessEqual(set(event["producers"]), producers, event["name"])
            fields = event["fields"] + [e for f in event["fields"] for e in f.get("entries", [])]
            for f in fields:
                where = "%s.%s" % (event["name"], f["name"])
                self.assertIn(f["type"], schema["types"], where)
                self.assertIsInstance(f["required"], bool, where)
                self.assertTrue(f["meaning"], where)
                self.assertLessEqual(set(f["producers"]), set(event["producers"]), where)
                self.assertRegex(f["name"], r"^[a-z][a-z0-9_]*$", where)
            field_names = [f["name"] for f in event["fields"]]
            self.assertEqual(len(field_names), len(set(field_names)), event["name"])

    def test_launch_record_is_well_formed(self):
        schema = load_schema()
        record = schema["launch_record"]
        self.assertEqual(record["file"], "launch.json")
        fields = record["fields"] + [e for f in record["fields"] for e in f.get("entries", [])]
        for f in fields:
            where = "launch_record.%s" % f["name"]
            self.assertIn(f["type"], schema["types"], where)
            self.assertIsInstance(f["required"], bool, where)
            self.assertTrue(f["meaning"], where)
            self.assertLessEqual(set(f["producers"]), set(record["producers"]), where)

    def test_line_check_finds_each_kind_of_disagreement(self):
        schema = load_schema()
        good = {"ev": "set_epoch", "t": 0.5, "sampler": 0, "epoch": 3}
        self.assertEqual(line_problems(schema, good, "x"), [])
        self.assertEqual(len(line_problems(schema, dict(good, extra=1), "x")), 1)
        self.assertEqual(len(line_problems(schema, {"ev": "set_epoch", "sampler": 0}, "x")), 1)
        self.assertEqual(len(line_problems(schema, dict(good, sampler="0"), "x")), 1)
        self.assertEqual(len(line_problems(schema, dict(good, sampler=True), "x")), 1)
        self.assertEqual(len(line_problems(schema, {"ev": "no_such_event"}, "x")), 1)
        part = {"ev": "loader", "id": 0, "dataset_parts": [{"len": "3"}]}
        self.assertEqual(len(line_problems(schema, part, "x")), 1)


class PythonConstantsTest(unittest.TestCase):
    def test_events_version_and_name_are_the_schemas(self):
        schema = load_schema()
        self.assertEqual(trace_events.EVENTS, tuple(e["name"] for e in schema["events"]))
        self.assertEqual(trace_events.VERSION, schema["version"])
        self.assertEqual(trace_events.TRACE, schema["trace"])

    def test_every_event_constant_is_listed(self):
        constants = {k: v for k, v in vars(trace_events).items()
                     if k.isupper() and k not in ("TRACE", "VERSION", "EVENTS")}
        self.assertEqual(sorted(constants.values()), sorted(trace_events.EVENTS))
        for name, value in constants.items():
            self.assertEqual(name, value.upper())


def page_sections():
    """{event: its section's text} of docs/trace-format.md's ``### `event` `` headings."""
    with open(FORMAT_PAGE, encoding="utf-8") as f:
        text = f.read()
    parts = re.split(r"^### `([a-z_]+)`.*$", text, flags=re.M)
    return text, {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


class FormatPageTest(unittest.TestCase):
    def test_the_page_has_one_section_per_event(self):
        _, sections = page_sections()
        self.assertEqual(sorted(sections), sorted(e["name"] for e in load_schema()["events"]))

    def test_every_field_is_described_in_its_events_section(self):
        text, sections = page_sections()
        schema = load_schema()
        for f in schema["common_fields"]:
            self.assertIn('"%s"' % f["name"], text)
        for event in schema["events"]:
            section = sections.get(event["name"], "")
            for f in event["fields"] + [e for f in event["fields"] for e in f.get("entries", [])]:
                named = "`%s`" % f["name"] in section or '"%s"' % f["name"] in section
                self.assertTrue(named, "docs/trace-format.md's section `%s` does not name %r"
                                % (event["name"], f["name"]))


class RecordedTraceTest(unittest.TestCase):
    """Every line the recorder writes for two programs (a DDP training with the program's own
    comm hook at W = 2; one rank leaving every piece of evidence: a draw, a stream, a
    ConcatDataset, no_sync, destroy, an error) conforms to the schema."""

    def check_run(self, program, args, world_size):
        schema = load_schema()
        with tempfile.TemporaryDirectory() as d:
            results = support.run_ranks(os.path.join(support.PROGRAMS, program), args,
                                        world_size=world_size, trace_dir=d)
            for code, out, err in results:
                self.assertNotIn("ddph_audit", err)
            problems, seen = [], set()
            for name in sorted(os.listdir(d)):
                for n, line in enumerate(support.read_trace(os.path.join(d, name)), 1):
                    problems += line_problems(schema, line, "%s line %d" % (name, n))
                    seen.add(line["ev"])
            self.assertEqual(problems, [])
            return seen

    def test_ddp_training_with_a_comm_hook(self):
        seen = self.check_run("ddp_train.py", ["--hook", "user"], 2)
        self.assertLessEqual({"header", "sampler", "loader", "epoch", "batch", "ddp", "forward",
                              "coll", "coll_done", "params", "step", "end"}, seen)

    def test_every_piece_of_evidence(self):
        seen = self.check_run("evidence.py", [], 1)
        self.assertLessEqual({"draw", "destroy", "process_group", "error", "set_epoch"}, seen)


if __name__ == "__main__":
    unittest.main()
