"""The fork server of ``ddp-sim launch``: torch imported once, each rank forked from it.

Run by the launcher as ``python3 [the program's interpreter options] fork_server.py --script
PATH [ARG...]`` (or ``--module NAME [ARG...]``) with the environment every rank shares and a Unix
SOCK_SEQPACKET socket as standard input. Standard library only: it imports nothing of ddph.

The protocol, one JSON object per message:
  server -> launcher  {"ready": true, "pid": P, "torch": "1.13.0" | null}
                      {"ready": false, "why": "..."}      (the launcher then execs the ranks)
  launcher -> server  {"fork": R, "env": {"RANK": "R", ...}}  with two descriptors attached:
                      the rank's stdout and stderr (write ends of the launcher's pipes)
  server -> launcher  {"forked": R, "pid": P, "group": G}  or  {"forked": R, "error": "..."}
                      (G: the ranks' process group, led by a child of the server that waits)
                      {"ended": P, "code": C}  or  {"ended": P, "signal": S}
The server ends when the launcher closes the socket; ranks still running then are killed.

What a forked rank shares with an exec'd one (docs/ddp-sim.md, "How ranks start"): sys.argv,
sys.orig_argv, sys.path, the environment, the working folder, /dev/null as stdin, its own stdout
and stderr pipes, ``__main__`` built as Python builds it for a script, the interpreter's signal
handling, Python's, torch's and numpy's random state seeded from the OS as a fresh
interpreter's is, exit codes and tracebacks as the interpreter gives them. What differs: modules
the server imported are already imported (torch: that is the point); every rank has the server's
hash seed (PYTHONHASHSEED); the ranks' group is led by a waiting child of the server, not by
rank 0; the interpreter's teardown is skipped (NOTE [Forked ranks' exit]).
"""

import ctypes
import gc
import json
import os
import select
import signal
import socket
import sys
import types

PR_SET_PDEATHSIG = 1
MAX_MESSAGE = 1 << 20
REAP_INTERVAL_S = 0.02
THIS_FILE = os.path.abspath(__file__)


class Program:
    """What every rank runs: a script or a module, and its arguments."""

    def __init__(self, script=None, module=None, args=()):
        self.script = script
        self.module = module
        self.args = list(args)


def parse_program(argv):
    if len(argv) < 2 or argv[0] not in ("--script", "--module"):
        raise SystemExit("usage: fork_server.py --script PATH [ARG...] | --module NAME [ARG...]")
    if argv[0] == "--script":
        return Program(script=argv[1], args=argv[2:])
    return Program(module=argv[1], args=argv[2:])


# -- the server ----------------------------------------------------------------------------

def send(sock, obj):
    sock.send(json.dumps(obj).encode())


def threads_alive():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def preload():
    """Imports torch (when this interpreter has it) as the ranks' own first ``import torch``
    would; returns its version, or None. An import error is the ranks' to meet, not ours."""
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        import torch
    except Exception:  # the program will raise it itself, with its own traceback
        return None
    return getattr(torch, "__version__", "?")


def fork_unsafe_reason():
    """Why forking now would not give each rank a clean process, or None."""
    n = threads_alive()
    if n > 1:
        return "%d threads were alive after importing torch (a fork copies none of them)" % n
    # torch.cuda's own flag, not is_initialized(): under --cpu the stand-in devices answer that
    # they are initialised, and no CUDA context exists.
    cuda = getattr(sys.modules.get("torch"), "cuda", None)
    if getattr(cuda, "_initialized", False):
        return "CUDA was initialised while importing torch (a forked child cannot use it)"
    return None


def reap(sock, children):
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        if os.WIFSIGNALED(status):
            send(sock, {"ended": pid, "signal": os.WTERMSIG(status)})
        else:
            send(sock, {"ended": pid, "code": os.waitstatus_to_exitcode(status)})


def serve(sock, group):
    """Answers fork requests until the launcher hangs up. Returns only in a forked rank."""
    children = {group}
    server_pid = os.getpid()
    while True:
        reap(sock, children)
        readable, _, _ = select.select([sock], [], [], REAP_INTERVAL_S)
        if not readable:
            continue
        data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 2)
        if not data:  # the launcher is gone or done: so are its ranks
            for pid in children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            os._exit(0)
        request = json.loads(data)
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as e:
            for fd in fds:
                os.close(fd)
            send(sock, {"forked": request["fork"], "error": str(e)})
            continue
        if pid == 0:
            become_rank(sock, request, fds, server_pid, group)
            return
        for fd in fds:
            os.close(fd)
        try:
            os.setpgid(pid, group)  # from this side too: in the group before the launcher hears of it
        except OSError:
            pass
        children.add(pid)
        send(sock, {"forked": request["fork"], "pid": pid, "group": group})


def die_with_parent(parent_pid):
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the line above
        os._exit(1)


def start_group_keeper():
    """A child that leads the ranks' process group and only waits to be killed: the group the
    launcher signals exists from the first rank to the last, whichever ranks have ended
    (a group whose last member is gone cannot be joined)."""
    server_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        die_with_parent(server_pid)
        os.closerange(0, 3)  # the launcher's socket among them: the server's death must show
        while True:
            signal.pause()
    try:
        os.setpgid(pid, pid)  # also from this side: no rank may ask to join before it exists
    except OSError:
        pass
    return pid


# -- in the forked rank --------------------------------------------------------------------

def become_rank(sock, request, fds, server_pid, group):
    """The process-level part: group, death with the server, streams, environment."""
    os.setpgid(0, group)
    die_with_parent(server_pid)
    sock.detach()  # fd 0 is replaced below: the socket object must not close it later
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    out, err = fds
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.close(out)
    os.close(err)
    os.environ.update(request.get("env", {}))


def reseed():
    """Random state as a fresh interpreter has it: Python's ``random`` reseeds itself after a
    fork; torch's default CPU generator and numpy's global one, both seeded from the OS when
    they are imported, do not."""
    torch = sys.modules.get("torch")
    np_random = sys.modules.get("numpy.random")
    try:
        if torch is not None:
            torch.default_generator.seed()
        if np_random is not None:
            np_random.seed()
    except Exception:
        pass


def restart_recorder():
    """The audit's recorder, when the server loaded it, records this rank as its own."""
    hook = getattr(sys.modules.get("ddph_audit"), "restart_in_forked_rank", None)
    if hook is not None:
        hook()


def set_argv(program):
    if program.script is not None:
        sys.argv = [program.script] + program.args
        first = os.path.dirname(os.path.realpath(program.script))
    else:
        sys.argv = ["-m"] + program.args  # runpy puts the module's path there
        first = os.getcwd()
    # -P (3.11) and -I put nothing before the standard entries: the server's path has none either.
    if not (getattr(sys.flags, "safe_path", False) or sys.flags.isolated) and sys.path:
        sys.path[0] = first
    orig = getattr(sys, "orig_argv", None)
    if orig is not None:
        mine = [k for k, a in enumerate(orig) if os.path.abspath(a) == THIS_FILE]
        i = mine[0] if mine else len(orig)
        spelled = [program.script] if program.script is not None else ["-m", program.module]
        sys.orig_argv = orig[:i] + spelled + program.args


def run_script(path):
    """Runs ``path`` as ``python3 path`` does: a fresh ``__main__`` that stays in sys.modules."""
    import builtins
    import importlib.machinery
    import io
    full = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)  # not normalised
    main = types.ModuleType("__main__")
    main.__file__ = full
    main.__cached__ = None
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", full)
    main.__spec__ = None
    main.__package__ = None
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    with io.open_code(full) as f:
        source = f.read()
    exec(compile(source, path, "exec", dont_inherit=True), main.__dict__)


def run_module(name):
    import runpy
    runpy._run_module_as_main(name, alter_argv=True)  # what `python3 -m name` calls


def without_our_frames(tb):
    """The traceback from the program's first frame, as an exec'd rank prints it."""
    import runpy
    ours = {THIS_FILE, os.path.abspath(runpy.__file__)}
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) in ours:
        tb = tb.tb_next
    return tb


def exit_code(e):
    """The exit status the interpreter gives an uncaught SystemExit (printing a code that is not
    an integer, as it does)."""
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write("%s\n" % (code,))
    except Exception:
        pass
    return 1


def run_program(program):
    """Runs the program; returns its exit status and whether a KeyboardInterrupt ended it."""
    try:
        if program.script is not None:
            run_script(program.script)
        else:
            run_module(program.module)
    except SystemExit as e:
        return exit_code(e), False
    except BaseException as e:
        tb = without_our_frames(e.__traceback__)
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        return 1, isinstance(e, KeyboardInterrupt)
    return 0, False


def flush_open_files():
    """Flushes the files the program left open, as their finalizers would at the interpreter's
    teardown. Only objects made since the fork are looked at (the server's are frozen, in no
    generation): no page shared with the server is written."""
    import io
    for generation in (0, 1, 2):
        for obj in gc.get_objects(generation=generation):
            if isinstance(obj, io.IOBase):
                try:
                    if not obj.closed and obj.writable():
                        obj.flush()
                except Exception:
                    pass


def finish(code, interrupted):
    """Ends the rank as the interpreter's exit does, up to its teardown: non-daemon threads
    joined, atexit handlers run, open files and stdio flushed, the exit status."""
    # NOTE [Forked ranks' exit]: the teardown (module dicts cleared, every object released)
    # would write the reference count of each object the rank shares with the server and copy
    # every such page: about 0.2 s of CPU a rank with torch loaded, seconds for a world. Python
    # promises no __del__ at exit for objects still alive then; what it does promise happens
    # here. docs/ddp-sim.md, "How ranks start".
    import atexit
    import threading
    threading._shutdown()
    atexit._run_exitfuncs()
    flush_open_files()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = code or 120  # the interpreter's status when it cannot flush stdout
    if interrupted:  # Python re-raises SIGINT on itself, so that its parent sees the signal
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def run_rank(program):
    """The program, in this forked rank, to its end: never returns."""
    set_argv(program)
    reseed()
    restart_recorder()
    finish(*run_program(program))


def hash_dependence(program):
    """Where the program depends on each process's own string hashing ("train.py:32 calls
    hash()": process_hash.py, beside this file, loaded under a private name, so nothing of ours is
    in the ranks' sys.modules), or None."""
    if program.script is None:
        return None
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("_ddph_process_hash",
                                                  os.path.join(here, "process_hash.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.hash_dependence(program.script)


def main():
    program = parse_program(sys.argv[1:])
    sock = socket.socket(fileno=0)
    # Ranks forked from one interpreter share its hash seed; torchrun's have their own.
    where = hash_dependence(program)
    if where is not None:
        send(sock, {"ready": False, "hash_dependence": where,
                    "why": "the program depends on each process's own string hashing (%s), which "
                           "ranks forked from one interpreter would share; under torchrun each "
                           "rank has its own PYTHONHASHSEED" % where})
        return 0
    version = preload()
    why = fork_unsafe_reason()
    if why is not None:
        send(sock, {"ready": False, "why": why})
        return 0
    gc.collect()
    gc.freeze()  # what every rank inherits stays shared: no copy-on-write from the collector
    group = start_group_keeper()
    send(sock, {"ready": True, "pid": os.getpid(), "torch": version})
    serve(sock, group)
    run_rank(program)  # only a forked rank gets here
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
