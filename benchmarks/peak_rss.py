"""Peak resident memory of a command, measured in a fresh process (Linux)."""

import subprocess
import sys

KB = 1024

# NOTE [Measuring peak RSS]
# ru_maxrss of a child spawned straight from the caller is useless: Linux carries the high-water
# mark of the image a child was forked (or vforked) from across exec, and a caller that imported
# torch holds ~240 MiB. So a small Python without torch forks the probe and reports its wait4 rusage; the
# probe then inherits only that small process's footprint (the `/bin/true` line shows how much).
_PROBE = """
import os, sys, time
deadline = time.monotonic() + float(sys.argv[1])
start = time.monotonic()
pid = os.fork()
if pid == 0:
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.execv(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
while True:
    done, status, usage = os.wait4(pid, os.WNOHANG)
    if done:
        break
    if time.monotonic() > deadline:
        os.kill(pid, 9)
        os.wait4(pid, 0)
        sys.exit("probe: no answer within the deadline")
    time.sleep(0.02)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, time.monotonic() - start)
"""


def peak_rss(cmd, timeout_s=600):
    """(peak RSS in bytes, wall seconds) of `cmd` in a fresh process; its stdout is discarded.
    Raises RuntimeError when it fails or runs past `timeout_s` (it is then killed)."""
    proc = subprocess.run([sys.executable, "-S", "-c", _PROBE, str(timeout_s), *cmd],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout_s + 30, check=False)
    err = proc.stderr.decode(errors="replace").strip()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {err}")
    code, maxrss_kib, wall = proc.stdout.split()
    if int(code) != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {code}: {err}")
    return int(maxrss_kib) * KB, float(wall)  # Linux reports ru_maxrss in KiB
