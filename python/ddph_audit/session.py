"""One process's recording: where it writes, and the services its instrumentors share.

A ``Session`` is made when recording starts (the first module the recorder instruments is
imported after ``ddph_audit.instrument``: registry.py); every instrumentor of the recorder takes it
in its constructor and keeps nothing of the process's in its module. What it holds:

- ``recorder`` (recorder.Recorder): the trace writer, ids, the rank's exit, the safety net;
- ``groups`` (groups.ProcessGroups): group ids and each group's collective sequence numbers;
- ``ddp`` (ddp_registry.DdpRegistry): the DDP modules this rank made;
- ``averaging`` (grad_sync.HandAveraging): optimizers whose gradients the program averages itself.

A test makes one of its own (``Session(folder)``, ``start()``) and hands it to the instrumentor
under test.
"""

from .ddp_registry import DdpRegistry
from .grad_sync import HandAveraging
from .groups import ProcessGroups
from .recorder import Recorder


class Session:
    def __init__(self, trace_dir, spawned_rank=False):
        self.trace_dir = trace_dir
        self.spawned_rank = spawned_rank  # started by an audited spawner (spawned_ranks.py)
        self.recorder = Recorder()
        self.groups = ProcessGroups(self.recorder)
        self.ddp = DdpRegistry(self.recorder)
        self.averaging = HandAveraging(self.recorder, self.ddp)

    def start(self, spawned_rank=None):
        """Starts recording into the trace folder; in a forked child (a fork server's rank, a
        forked spawned rank), starts the child's own file. ``spawned_rank`` None: the session's."""
        spawned = self.spawned_rank if spawned_rank is None else spawned_rank
        self.recorder.start(self.trace_dir, spawned_rank=spawned)
