"""The environments the grader's child processes start with: a judge's (the grader's own, scrubbed) and a
worker server's (built from nothing). Beside grader.core.host, below every floor that starts a process."""
from __future__ import annotations

import os

_SETTINGS = dict(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1",
                 PYTHONHASHSEED="0", OMP_NUM_THREADS="1", MPLBACKEND="Agg",
                 # idle OpenMP workers spin by default; on a busy 2-core runner that slows training tenfold
                 OMP_WAIT_POLICY="PASSIVE")
# what a worker's interpreter needs from the host's environment: its libraries (a GPU machine's driver path,
# the visible devices) and, on Windows, what Python itself cannot start without; never tokens or keys
_WORKER_KEEP = ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "SYSTEMROOT", "WINDIR", "TEMP", "TMP", "TMPDIR", "PATH")


def child_env() -> dict[str, str]:
    """A judge's environment: the grader's, less pytest's, coverage's and the lab's own secrets."""
    # no PYTHON* variable of the caller's (PYTHONPATH, PYTHONSTARTUP, PYTHONHOME, ...): the interpreter starts
    # with the grader's settings alone (grader.core.host.python puts the grader on sys.path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "ATTNLAB", "COV_", "PYTHON"))}
    env.update(_SETTINGS)
    return env


def worker_env() -> dict[str, str]:
    """A worker server's environment, built from nothing: student code can print os.environ into a report."""
    env = {k: os.environ[k] for k in _WORKER_KEEP if k in os.environ}
    env.update(_SETTINGS, PYTHONIOENCODING="utf-8")
    return env
