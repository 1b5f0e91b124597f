"""What a rank of `ddp-sim launch` sees of its process, as one JSON line (fork_server_test: a
forked rank must see what an exec'd one sees), then its random state on a second line."""
import json, os, signal, sys, random, stat, threading, multiprocessing

import torch  # first, as a rank imports it: what torch opens at import is then every rank's
def kind(fd):
    m = os.fstat(fd).st_mode
    return "fifo" if stat.S_ISFIFO(m) else "chr" if stat.S_ISCHR(m) else "sock" if stat.S_ISSOCK(m) else "other"
info = {
 "argv": sys.argv, "orig_argv": sys.orig_argv[1:], "path": sys.path, "cwd": os.getcwd(),
 "env": {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT",)},
 "name": __name__, "file": __file__, "spec": repr(__spec__), "package": repr(__package__),
 "loader": type(__loader__).__name__, "builtins": type(__builtins__).__name__, "doc": __doc__,
 "main": sys.modules["__main__"].__dict__ is globals(),
 "fds": sorted(os.listdir("/proc/self/fd")), "stdin": os.readlink("/proc/self/fd/0"),
 "kinds": [kind(0), kind(1), kind(2)], "line_buffering": [sys.stdout.line_buffering, sys.stderr.line_buffering],
 "enc": [sys.stdout.encoding, sys.stdout.errors, sys.stderr.errors], "flags": list(sys.flags),
 "signals": {n: str(signal.getsignal(getattr(signal, n))) for n in ("SIGINT", "SIGTERM", "SIGPIPE", "SIGCHLD", "SIGXFSZ", "SIGHUP")},
 "mask": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
 "own_group": os.getpgid(0) != os.getpgid(os.getppid()), "umask": os.umask(0o22), "threads": threading.active_count(),
 "tasks": len(os.listdir("/proc/self/task")), "mp": multiprocessing.current_process().name,
 "executable": sys.executable,
}
print(json.dumps(info, sort_keys=True))
print(json.dumps({"random": random.random(), "torch": torch.initial_seed(), "np": __import__("numpy").random.rand()}))
