"""The one registry of instrumentors (ddph_audit/registry.py): every entry names a class that is an
Instrumentor made as ``Cls(session)`` and a switch of environment.py; an Instrumentation installs
the entries its environment switches on, each once, when its module is imported, records only in
a process the recording rule lets record, and undoes the recorder's entries at the end."""

import io
import os
import sys
import tempfile
import types
import unittest

from ddph_audit import environment, registry
from ddph_audit.instrumentor import Instrumentor
from tests import support

FAKE = "ddph_registry_test_module"  # imported by the tests below, never by anything else
made = []  # (class name, session) of every fake instrumentor made, in order


class _Fake(Instrumentor):
    NAME = "a fake"

    def __init__(self, session=None):
        super().__init__(session)
        made.append((type(self).__name__, session))

    def _instrument(self):
        self.patch(sys.modules[FAKE], type(self).__name__, True)


class Recorded(_Fake):
    pass


class AtStart(_Fake):
    def _instrument(self):
        pass


class Emulated(_Fake):
    pass


class Broken(_Fake):
    def _instrument(self):
        raise RuntimeError("cannot patch")


def _entry(name, module, cls, switch):
    return registry.Entry(name, module, "%s:%s" % (__name__, cls.__name__), switch)


ENTRIES = (
    _entry("at start", None, AtStart, environment.AUDIT_DIR),
    _entry("recorded", FAKE, Recorded, environment.AUDIT_DIR),
    _entry("emulated", FAKE, Emulated, environment.CPU),
    _entry("broken", FAKE, Broken, environment.STAND_IN_DATA),
)


class RegistryTest(unittest.TestCase):
    def setUp(self):
        made.clear()
        sys.modules.pop(FAKE, None)
        self.folder = tempfile.TemporaryDirectory()
        self.env = support.saved_environment("RANK", "WORLD_SIZE", environment.AUDIT_RANK_PID)
        os.environ.update(RANK="0", WORLD_SIZE="1")
        self.instrumentation = registry.Instrumentation(ENTRIES)

    def tearDown(self):
        self.instrumentation.stop_recording()
        sys.modules.pop(FAKE, None)
        support.restore_environment(self.env)
        self.folder.cleanup()

    def import_fake(self):
        module = types.ModuleType(FAKE)
        sys.modules[FAKE] = module
        # A real import's end, as the post-import hook sees it (the module is not on disk).
        self.instrumentation._imports.fire(FAKE, module)
        return module

    def test_every_entry_is_an_instrumentor_behind_a_known_switch(self):
        switches = {v for k, v in vars(environment).items() if k.isupper()}
        names = [e.name for e in registry.INSTRUMENTORS]
        self.assertEqual(len(names), len(set(names)))
        for entry in registry.INSTRUMENTORS:
            self.assertIn(entry.switch, switches, entry.name)
            cls = entry.load()
            self.assertTrue(issubclass(cls, Instrumentor), entry.name)
            if not entry.records:
                self.assertIsNone(cls(None).session, entry.name)

    def test_only_what_the_environment_switches_on_is_installed_when_imported(self):
        self.instrumentation.install_switched(environ={environment.CPU: "1"})
        self.assertEqual(made, [])
        module = self.import_fake()
        self.assertEqual(made, [("Emulated", None)])
        self.assertTrue(module.Emulated)
        self.instrumentation.install_switched(environ={environment.CPU: "1"})  # once only
        self.assertEqual(len(made), 1)

    def test_recording_makes_a_session_before_the_first_recorded_module(self):
        environ = {environment.AUDIT_DIR: self.folder.name, environment.CPU: "1"}
        self.instrumentation.install_switched(environ=environ)
        self.assertIsNone(self.instrumentation.session)
        module = self.import_fake()
        session = self.instrumentation.session
        self.assertIsNotNone(session)
        self.assertEqual([name for name, _ in made], ["AtStart", "Recorded", "Emulated"])
        self.assertTrue(all(s is session for _, s in made), "every one writes to the session")
        self.assertTrue(module.Recorded)
        self.assertTrue(os.path.exists(os.path.join(self.folder.name, "rank-0.jsonl")))
        self.instrumentation.stop_recording()
        self.assertFalse(hasattr(module, "Recorded"), "the recorder's entries are undone")
        self.assertTrue(module.Emulated, "the others stay")
        self.assertIsNone(self.instrumentation.session)

    def test_a_process_an_audited_rank_started_records_nothing(self):
        environ = {environment.AUDIT_DIR: self.folder.name, environment.AUDIT_RANK_PID: "1"}
        self.assertIsNone(registry.recording_request(environ))
        self.instrumentation.install_switched(environ=environ)
        self.import_fake()
        self.assertEqual(made, [])
        spawned = dict(environ, **{environment.AUDIT_SPAWNER: str(os.getppid())})
        self.assertEqual(registry.recording_request(spawned), (self.folder.name, True))
        own = {environment.AUDIT_DIR: self.folder.name,
               environment.AUDIT_RANK_PID: str(os.getpid())}
        self.assertEqual(registry.recording_request(own), (self.folder.name, False))

    def test_a_failing_instrumentor_is_one_line_and_the_program_goes_on(self):
        self.instrumentation.install_switched(environ={environment.STAND_IN_DATA: "1"})
        err = sys.stderr
        sys.stderr = captured = io.StringIO()
        try:
            module = self.import_fake()
        finally:
            sys.stderr = err
        self.assertEqual(captured.getvalue(),
                         "ddph_audit: a fake could not be installed: RuntimeError: cannot patch\n")
        self.assertFalse(hasattr(module, "Broken"))


if __name__ == "__main__":
    unittest.main()
