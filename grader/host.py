"""What this machine's OS and Python let the grader use, decided once: every process start goes through here.

- `python(module, ...)`: the argv that runs a grader module in a fresh interpreter without putting the
  working directory on `sys.path` (`-P` from Python 3.11; on 3.10 a bootstrap that drops it).
- `FORK_SERVERS`: Linux with `os.fork`, descriptor passing and `resource`. Elsewhere (Windows; macOS,
  where forking after torch has loaded its thread pools and Apple's frameworks is unsafe, which is why
  Python's own multiprocessing spawns there) every judge and worker is a fresh interpreter.
"""
from __future__ import annotations

import os
import signal
import socket
import sys

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

FORK_SERVERS = (sys.platform == "linux" and hasattr(os, "fork") and hasattr(socket, "send_fds")
                and hasattr(os, "killpg") and resource is not None)

# -P keeps the interpreter from importing a `torch.py` or `json.py` left in its working directory
_BOOT = ("import sys; del sys.path[0]; import runpy; m = sys.argv.pop(1); "
         "runpy.run_module(m, run_name='__main__', alter_sys=True)")


def python(module: str, *args: str) -> list[str]:
    """argv running `python -m module args...` with the working directory kept off sys.path."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module, *args]
    return [sys.executable, "-c", _BOOT, module, *args]


class StartError(Exception):
    """The grader could not start its own processes: never the student's fault; str() names the cause."""


def signal_name(num: int) -> str:
    """SIGKILL for 9: how reports name the signal that ended a process."""
    try:
        return signal.Signals(num).name
    except ValueError:
        return "unknown signal"
