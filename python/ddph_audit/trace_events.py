"""The trace's name, version and event names, as the schema defines them
(core/trace/trace_schema.json; docs/trace-format.md). tests/test_trace_schema.py fails when this
module and the schema disagree: a new event is added to both (docs/trace-format.md, "Adding a
trace event")."""

TRACE = "ddph-audit"
VERSION = 1

HEADER = "header"
SAMPLER = "sampler"
SET_EPOCH = "set_epoch"
LOADER = "loader"
EPOCH = "epoch"
DRAW = "draw"
BATCH = "batch"
EPOCH_END = "epoch_end"
DDP = "ddp"
FORWARD = "forward"
COLL = "coll"
COLL_DONE = "coll_done"
GROUP = "group"
GROUP_CALL = "group_call"
PARAMS = "params"
ERROR = "error"
DESTROY = "destroy"
PROCESS_GROUP = "process_group"
EMULATION = "emulation"
SPAWN = "spawn"
FRAMEWORK = "framework"
LOGGED = "logged"
STEP = "step"
SEED = "seed"
GLOBAL_DRAW = "global_draw"
AVERAGED = "averaged"
AVERAGED_USE = "averaged_use"
END = "end"

EVENTS = (HEADER, SAMPLER, SET_EPOCH, LOADER, EPOCH, DRAW, BATCH, EPOCH_END, DDP, FORWARD, COLL,
          COLL_DONE, GROUP, GROUP_CALL, PARAMS, ERROR, DESTROY, PROCESS_GROUP, EMULATION, SPAWN, FRAMEWORK,
          LOGGED, STEP, SEED, GLOBAL_DRAW, AVERAGED, AVERAGED_USE, END)
