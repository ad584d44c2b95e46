"""A stand-in for Windows on Linux, imported by a .pth file before anything else runs in every interpreter of
a test venv: it takes away what Windows lacks, so the grader's path without fork is exercised here.

What goes is not a list of our own: tests/platforms/stubs_account.py derives it from the standard library's type
stubs (typeshed: the names defined only where `sys.platform != "win32"`), for the names the grader's source uses,
and writes it into this file (LACKS): os.fork, os.O_NOFOLLOW, os.getpgid, signal.SIGKILL,
socket.send_fds, the whole of `resource`... A module the stubs give nothing on win32 cannot be imported.

The grader's own modules (and a `python -c` script) that import os, signal or socket get a copy without those
names, and read sys.platform as "win32", so the branches the platform check reads (`if sys.platform == "win32":`)
are the ones taken here; the rest of sys is the real one. Every other module keeps the real ones: the standard
library's and numpy's are their Linux code standing in for their Windows code, which needs none of those names
(subprocess waits with os.WNOHANG, numpy and platform read os.uname), so taking them away there would test Linux's
libraries, not the grader.
Behaviour the stubs cannot say is patched here: Popen refuses its POSIX-only arguments (Windows refuses preexec_fn
and pass_fds), and Popen.kill keeps working (TerminateProcess on Windows).
"""
import builtins
import importlib
import os
import subprocess
import sys
import types

# {module: [names] or None for the whole module}: written by `python tests/platforms/stubs_account.py --write`, and
# tests/platforms/test_stubs_account.py fails when the stubs or the grader's source say otherwise
LACKS = {'os': ['O_DIRECTORY', 'O_NOFOLLOW', 'O_NONBLOCK', 'WNOHANG', 'fork', 'geteuid', 'getpgid', 'killpg', 'setgroups', 'setresgid', 'setresuid', 'setsid', 'sync', 'sysconf', 'uname'], 'resource': None, 'signal': ['SIGALRM', 'SIGCHLD', 'SIGKILL', 'SIGXFSZ'], 'socket': ['recv_fds', 'send_fds']}  # the stubs' account

# Linux's jail without fork (tests/redteam/test_nofork.py's seccomp case): the grader reads its real platform and
# lacks only what starting processes by fork needs, not what Windows lacks besides
KEEP_PLATFORM = os.environ.get("ATTNLAB_STANDIN_PLATFORM") == "linux"
if KEEP_PLATFORM:
    LACKS = {"os": ["fork", "forkpty", "killpg", "setsid", "setpgid", "getpgid", "setpgrp"], "resource": None,
             "socket": ["recv_fds", "send_fds"]}
GONE = {name for name, names in LACKS.items() if names is None}  # `import resource` raises ImportError
VIEWS = {}  # {module name: the copy of it that code outside the standard library gets}
for _module, _names in LACKS.items():
    if _names is not None:
        _real = importlib.import_module(_module)
        _view = types.ModuleType(_real.__name__, _real.__doc__)
        _view.__dict__.update(_real.__dict__)
        for _name in _names:
            _view.__dict__.pop(_name, None)
        VIEWS[_module] = (_real, _view)



class _WindowsSys(types.ModuleType):
    """sys as the grader sees it on Windows: the real one, read and written through, but for its platform."""

    def __getattribute__(self, name):
        return "win32" if name == "platform" else getattr(sys, name)

    def __setattr__(self, name, value):
        setattr(sys, name, value)


WINDOWS_SYS = _WindowsSys("sys")
_import = builtins.__import__


def _the_graders(importer) -> bool:
    return ((importer or {}).get("__name__") or "").partition(".")[0] in ("grader", "__main__")


def _windows_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level or not _the_graders(globals):
        return _import(name, globals, locals, fromlist, level)
    if name == "sys" and not KEEP_PLATFORM:
        return WINDOWS_SYS
    if name.partition(".")[0] in GONE:
        raise ModuleNotFoundError(f"No module named {name!r} (attnlab no-fork stand-in: Windows has none)", name=name)
    module = _import(name, globals, locals, fromlist, level)
    real, view = VIEWS.get(getattr(module, "__name__", ""), (None, None))
    return view if module is real else module


builtins.__import__ = _windows_import

_init = subprocess.Popen.__init__


def _windows_popen(self, *args, **kwargs):
    for arg in ("preexec_fn", "pass_fds", "start_new_session", "process_group"):
        if kwargs.get(arg):
            raise ValueError(f"{arg} is not supported on Windows platforms (attnlab no-fork stand-in)")
    return _init(self, *args, **kwargs)


def _kill(self):
    if self.returncode is None:
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass


subprocess.Popen.__init__ = _windows_popen
subprocess.Popen.kill = _kill
os.environ["ATTNLAB_STANDIN"] = "nofork"
