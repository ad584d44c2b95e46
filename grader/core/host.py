"""What this machine's OS and Python let the grader use, decided once: every process start goes through here.

- `python(module, ...)`: the argv that runs a grader module in a fresh interpreter isolated from the folder it
  starts in and from whatever sits beside the grader: no working directory, no user site-packages, and on
  `sys.path` only `import_root()`, a folder whose one entry is the grader package (where the grader lives
  inside a student's repository, its root may hold a `sitecustomize.py`, a `torch.py` or a plugin).
  The environment is the caller's to scrub (grader.core.childenv: no inherited `PYTHON*` variable).
- `FORK_SERVERS`: Linux with `os.fork`, descriptor passing and `resource`. Elsewhere (Windows; macOS,
  where forking after torch has loaded its thread pools and Apple's frameworks is unsafe, which is why
  Python's own multiprocessing spawns there) every judge and worker is a fresh interpreter.
"""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import sys
import tempfile
from pathlib import Path

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

FORK_SERVERS = (sys.platform == "linux" and hasattr(os, "fork") and hasattr(socket, "send_fds")
                and hasattr(os, "killpg") and resource is not None)

# -s: no user site-packages. The bootstrap drops the working directory that -c puts first on 3.10 (-P does it
# from 3.11, but the same bootstrap serves every version) and puts the grader's import root in its place.
# Nothing is imported before the path is cleaned: on 3.10 runpy is a plain file, and the working directory
# (/tmp for the fork servers) could hold a runpy.py of anyone's.
_BOOT = ("import sys; sys.path[:] = [sys.argv.pop(1)] + [p for p in sys.path if p]; "
         "import runpy; runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")
_MARK = "attnlab-imports-"
_made: list[str] = []


def import_root() -> str:
    """A folder holding only the grader package: what a child interpreter imports the grader from. A child
    reuses the one it was started with (first on its sys.path); the first process makes one and removes it."""
    for entry in sys.path[:1] + _made:
        if os.path.basename(entry).startswith(_MARK) and os.listdir(entry) == ["grader"]:
            return entry
    made = tempfile.mkdtemp(prefix=_MARK)
    os.chmod(made, 0o755)  # a worker dropped to nobody imports through it
    real = Path(__file__).resolve().parent.parent  # the grader package (this module is grader/core/host.py)
    try:
        os.symlink(real, Path(made) / "grader", target_is_directory=True)
    except OSError:  # Windows without the right to make links: a package that is the real one under another name
        (Path(made) / "grader").mkdir()
        (Path(made) / "grader" / "__init__.py").write_text(
            f"__path__ = [{str(real)!r}]\n__file__ = {str(real / '__init__.py')!r}\n"
            "with open(__file__, encoding='utf-8') as f:\n    exec(compile(f.read(), __file__, 'exec'))\n")
    owner = os.getpid()
    # forked judges inherit this handler: only the process that made the folder removes it
    atexit.register(lambda: os.getpid() == owner and shutil.rmtree(made, ignore_errors=True))
    _made.append(made)
    return made


def python(module: str, *args: str) -> list[str]:
    """argv running `python -m module args...` with nothing on sys.path but the interpreter's and the grader's."""
    return [sys.executable, "-s", "-c", _BOOT, import_root(), module, *args]


class StartError(Exception):
    """The grader could not start its own processes: never the student's fault; str() names the cause."""


def signal_name(num: int) -> str:
    """SIGKILL for 9: how reports name the signal that ended a process."""
    try:
        return signal.Signals(num).name
    except ValueError:
        return "unknown signal"
