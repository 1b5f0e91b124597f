"""A rank that stays alive until the file argv[1] exists (the test creates it once it has seen
what it waits for), then exits 0; exit 1 if it never comes within 300 s. progress_line_test: the
launcher's progress line counts the forked ranks while they run."""
import os
import sys
import time

import torch  # noqa: F401  (a torch program: its ranks are forked by the fork server)

deadline = time.monotonic() + 300
while not os.path.exists(sys.argv[1]):
    if time.monotonic() > deadline:
        sys.exit(1)
    time.sleep(0.02)
