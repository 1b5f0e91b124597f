"""Process groups as the trace names them, and each group's collective sequence numbers.

A shared service of the instrumentors: the distributed instrumentor declares the groups it sees
made (``new_group``) and numbers the program's collectives; the DDP instrumentor and its backward
watch number DDP's bucket allreduces in the same sequence. ``"0"`` is the default group; another
group gets its id (``"1"``, ``"2"``, ...) and a ``group`` line when it is first made or seen.
One per recording session (session.py), written through its recorder.
"""

import threading

from . import trace_events


def dtype_name(dtype):
    """``float32`` for ``torch.float32``: how a collective line names a dtype."""
    return str(dtype).replace("torch.", "")


class ProcessGroups:
    """Group ids and sequence numbers. ``next_seqs`` is called from any thread (the autograd
    thread for DDP's buckets) and takes its own lock; ids are declared under the GIL."""

    def __init__(self, recorder):
        self.recorder = recorder  # recorder.Recorder: the group lines and their ids
        self.c10d = None  # torch.distributed.distributed_c10d, once the distributed one is in
        self._seq_lock = threading.Lock()
        self._seq = {}  # group id -> next seq
        self._ids = {}  # id(pg) -> (pg, group id)

    def group_id(self, group):
        """"0" for the default group (None / WORLD), the declared id for the others."""
        if group is None:
            return "0"
        c10d = self.c10d
        try:
            world = c10d.GroupMember.WORLD if hasattr(c10d, "GroupMember") else None
            if group is world or group is c10d._get_default_group():
                return "0"
        except Exception:
            pass
        entry = self._ids.get(id(group))
        if entry is not None and entry[0] is group:
            return entry[1]
        # A group created by a path we did not see: declare it now.
        return self.declare(group, self.ranks_of(group))

    def known_id(self, group):
        """The id of a group seen before, "0" for the default group or one never seen."""
        if group is None:
            return "0"
        return self._ids.get(id(group), (None, "0"))[1]

    def ranks_of(self, group):
        c10d = self.c10d
        try:
            fn = getattr(c10d, "get_process_group_ranks", None)
            if fn is not None:
                return [int(r) for r in fn(group)]
        except Exception:
            pass
        try:
            return sorted(int(r) for r in c10d._pg_group_ranks[group].keys())
        except Exception:
            return None

    def declare(self, group, ranks):
        """A new group's id and its ``group`` line; ``group`` None for one this rank is not in."""
        gid = str(self.recorder.next_id("group") + 1)
        if group is not None:
            self._ids[id(group)] = (group, gid)
        self.recorder.emit(trace_events.GROUP, id=gid, ranks=ranks)
        return gid

    def is_member(self, group):
        """False for a group this rank is not in (its calls are not recorded)."""
        if group is None:
            return True
        try:
            fn = getattr(self.c10d, "_rank_not_in_group", None)
            return not (bool(fn(group)) if fn is not None else False)
        except Exception:
            return True

    def next_seq(self, gid):
        return self.next_seqs(gid, 1)

    def next_seqs(self, gid, count):
        """The first of ``count`` consecutive sequence numbers of the group, taken at once."""
        with self._seq_lock:
            n = self._seq.get(gid, 0)
            self._seq[gid] = n + count
            return n

