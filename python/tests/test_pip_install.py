"""``pip install ./python`` as the README says, with no option, offline, in a venv that sees
Debian's torch: the five packages are installed, nothing is written into this source tree (the
in-tree backend, _build_backend/ddph_build.py, writes only the wheel), and pytest finds the plugin
through its entry point (no -p) and runs a distributed test with it. Run by ctest
(python/CMakeLists.txt):

    python3 -m pytest tests/test_pip_install.py      (from python/; DDPH_SIM set)

The venv lives in a temporary folder, removed at the end.
"""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from ddph_audit import environment

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEP_TIMEOUT_S = 300

TEST_FILE = """
import pytest, torch, torch.distributed as dist

@pytest.mark.distributed(world_size=2)
def test_allreduce(rank, world_size):
    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    assert t.item() == 1
"""


def _run(argv, cwd, env=None):
    done = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=STEP_TIMEOUT_S)
    assert done.returncode == 0, "%s exited %d:\n%s\n%s" % (argv, done.returncode, done.stdout,
                                                           done.stderr)
    return done.stdout


@pytest.fixture
def folder():
    path = tempfile.mkdtemp(prefix="ddph-pip-")
    yield path
    shutil.rmtree(path)


def _listing(top):
    """Every path under `top` but bytecode caches (other tests' interpreters may write them)."""
    paths = []
    for folder, dirs, names in os.walk(top):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        paths += [os.path.relpath(os.path.join(folder, n), top) for n in dirs + names]
    return sorted(paths)


def test_pip_install_then_pytest_finds_the_plugin(folder):
    sim = os.environ.get(environment.SIM) or shutil.which("ddp-sim")
    if not sim:
        pytest.skip("ddp-sim is not built: set DDPH_SIM to build/bin/ddp-sim")
    venv, work = (os.path.join(folder, name) for name in ("venv", "work"))
    os.mkdir(work)
    try:
        _run([sys.executable, "-m", "venv", "--system-site-packages", venv], folder)
    except AssertionError as e:
        pytest.skip("no venv here (Debian: apt-get install python3-venv): %s" % e)
    python = os.path.join(venv, "bin", "python")
    before = _listing(PYTHON_DIR)
    out = _run([python, "-m", "pip", "install", PYTHON_DIR], folder)
    assert "Successfully installed ddp-harness-0.1.0" in out
    assert _listing(PYTHON_DIR) == before, "pip install wrote into %s" % PYTHON_DIR

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", environment.SIM)}
    env["PATH"] = os.path.dirname(os.path.abspath(sim)) + os.pathsep + env.get("PATH", "")
    env["COLUMNS"] = "200"
    where = _run([python, "-c", "import ddph_audit, ddph_emulation, ddph_elastic, ddph_launch, "
                  "ddph_pytest.plugin; print(ddph_audit.__file__); print(ddph_pytest.plugin.__file__)"], work, env)
    assert all(line.startswith(venv) for line in where.split()), where
    assert os.path.isfile(os.path.join(os.path.dirname(where.split()[0]), "_sitecustomize",
                                       "sitecustomize.py"))

    with open(os.path.join(work, "test_installed.py"), "w") as f:
        f.write(TEST_FILE)
    out = _run([python, "-m", "pytest", "-p", "no:cacheprovider", "-v", "test_installed.py"],
               work, env)
    assert "plugins: ddp-harness-0.1.0" in out
    assert "ddph: distributed tests audited by %s" % os.path.join(
        os.path.dirname(os.path.abspath(sim)), "ddp-sim") in out
    assert "test_installed.py::test_allreduce PASSED" in out
