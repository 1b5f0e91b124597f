"""The stop rule in Python (ddph_launch/world_stop.py) is the C++ supervisor's: the same signals in
the same order and the same grace as core/launch/src/world_stop.cpp and supervisor.h, and, on real
process groups, what NOTE [Stopping a world] says: SIGTERM then SIGCONT (a stopped rank acts on the
SIGTERM at once), SIGKILL once the grace has run out; a rank ended by either was ended by the stop,
one that died of anything else while the world was being stopped died on its own."""

import os
import re
import signal
import subprocess
import time
import unittest

from ddph_launch import world_stop
from tests import support

LAUNCH_SRC = os.path.join(os.path.dirname(support.PYTHON_DIR), "core", "launch", "src")
GRACE_S = 0.5


def cpp_function(path, name):
    """The body of C++ function ``name`` (a definition starting a line, ending at a "}" that does)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start = re.search(r"^\S.*\b%s\(" % re.escape(name), text, re.M)
    assert start is not None, "%s not found in %s" % (name, path)
    return text[start.start():text.index("\n}\n", start.start())]


def group(*command):
    """A process leading its own process group (as a rank does), and its group's id."""
    p = subprocess.Popen(command, start_new_session=True, stdin=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    return p, [p.pid]


def ended_of(p, timeout):
    """The signal ``p`` ended of (0: it exited), or None while it runs after ``timeout``."""
    try:
        code = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    return -code if code < 0 else 0


class TheCppRuleTest(unittest.TestCase):
    def test_the_same_signals_in_the_same_order(self):
        source = os.path.join(LAUNCH_SRC, "world_stop.cpp")
        begin = re.findall(r"::killpg\(group, (SIG\w+)\)", cpp_function(source, "WorldStop::begin"))
        kill = re.findall(r"::killpg\(group, (SIG\w+)\)", cpp_function(source, "WorldStop::kill"))
        self.assertEqual(begin, [s.name for s in world_stop.BEGIN_SIGNALS])
        self.assertEqual(kill, [world_stop.KILL_SIGNAL.name])
        ended = cpp_function(source, "WorldStop::endedByStop")
        self.assertIn("signal == SIGTERM || (signal == SIGKILL && killSent_)", ended)

    def test_the_same_grace(self):
        with open(os.path.join(LAUNCH_SRC, "supervisor.h"), encoding="utf-8") as f:
            grace = re.search(r"std::chrono::milliseconds grace\{(\d+)\};", f.read())
        grace_ms = int(grace.group(1))
        self.assertEqual(world_stop.GRACE_S * 1000, grace_ms)


class RealProcessesTest(unittest.TestCase):
    def setUp(self):
        self.processes = []

    def tearDown(self):
        for p in self.processes:  # the group too: a shell's sleep may outlive it
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()

    def start(self, *command):
        p, groups = group(*command)
        self.processes.append(p)
        time.sleep(0.2)  # its shell has set its traps
        return p, groups

    def test_a_running_rank_ends_of_the_sigterm_and_was_stopped_by_it(self):
        p, groups = self.start("sleep", "30")
        stop = world_stop.WorldStop(GRACE_S)
        self.assertTrue(stop.begin(groups))
        self.assertFalse(stop.begin(groups), "once only")
        sig = ended_of(p, GRACE_S)
        self.assertEqual(sig, signal.SIGTERM)
        self.assertTrue(stop.ended_by_stop(sig))
        self.assertTrue(stop.stopped(True, sig))

    def test_a_stopped_rank_is_seen_stopped_and_acts_on_the_sigterm_at_once(self):
        p, groups = self.start("sleep", "30")
        os.kill(p.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while not world_stop.in_stop_state(p.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertTrue(world_stop.in_stop_state(p.pid))
        stop = world_stop.WorldStop(30.0)  # no SIGKILL needed: the SIGCONT wakes it
        stop.begin(groups)
        self.assertEqual(ended_of(p, 5), signal.SIGTERM)

    def test_a_rank_that_ignores_sigterm_is_killed_after_the_grace(self):
        p, groups = self.start("sh", "-c", "trap '' TERM; sleep 30")
        stop = world_stop.WorldStop(GRACE_S)
        stop.begin(groups)
        self.assertIsNone(ended_of(p, GRACE_S), "alive through the grace")
        self.assertTrue(stop.kill(groups))
        self.assertFalse(stop.kill(groups), "once only")
        sig = ended_of(p, 5)
        self.assertEqual(sig, signal.SIGKILL)
        self.assertTrue(stop.ended_by_stop(sig))

    def test_a_sigkill_of_its_own_during_the_grace_is_its_own_death(self):
        p, groups = self.start("sh", "-c", "trap '' TERM; sleep 30")
        stop = world_stop.WorldStop(30.0)
        stop.begin(groups)
        os.kill(p.pid, signal.SIGKILL)  # an OOM kill, say
        sig = ended_of(p, 5)
        self.assertEqual(sig, signal.SIGKILL)
        self.assertFalse(stop.ended_by_stop(sig))
        self.assertFalse(stop.stopped(True, sig))

    def test_a_rank_that_leaves_on_its_own_at_the_sigterm_was_stopped_by_it(self):
        p, groups = self.start("sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.05; done")
        stop = world_stop.WorldStop(30.0)
        stop.begin(groups)
        self.assertEqual(ended_of(p, 5), 0)
        self.assertTrue(stop.stopped(True, 0))
        self.assertFalse(stop.stopped(False, 0), "not running when the stop began: its own end")

    def test_nothing_is_killed_before_the_stop_began(self):
        p, groups = self.start("sleep", "30")
        stop = world_stop.WorldStop(GRACE_S)
        self.assertFalse(stop.kill(groups))
        self.assertFalse(stop.ended_by_stop(signal.SIGTERM))
        self.assertIsNone(ended_of(p, 0.2))


if __name__ == "__main__":
    unittest.main()
