"""Guards installed in a grading child before any submission code runs.

An audit hook refuses what model code never needs (writing files, spawning processes, reading
the reference or the grader from disk, patching library types, walking the heap), and a watch list
notices library functions that were swapped at import time.
"""
from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

import torch
import torch.testing


class Blocked(PermissionError):
    """Raised into submission code that tried something the grader forbids."""


WATCHED = {
    "torch.allclose": (torch, "allclose"),
    "torch.isclose": (torch, "isclose"),
    "torch.equal": (torch, "equal"),
    "torch.testing.assert_close": (torch.testing, "assert_close"),
    "torch.softmax": (torch, "softmax"),
    "torch.bmm": (torch, "bmm"),
    "torch.nn.Module.load_state_dict": (torch.nn.Module, "load_state_dict"),
    "torch.nn.Module.__call__": (torch.nn.Module, "__call__"),
}
_ORIGINAL = {name: getattr(owner, attr) for name, (owner, attr) in WATCHED.items()}
_NEVER_FROM_SUBMISSION = {
    "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
    "os.remove", "os.rename", "os.rmdir", "os.truncate", "os.chmod", "os.symlink", "os.link",
    "shutil.rmtree", "shutil.copyfile", "shutil.move", "socket.connect", "socket.bind",
    "ctypes.dlopen", "ctypes.dlsym", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "sys.settrace", "sys.setprofile", "os.putenv", "os.unsetenv", "os.kill", "os.killpg",
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def tampered() -> list[str]:
    """Names of watched functions that no longer are the originals; puts the originals back."""
    changed = []
    for name, (owner, attr) in WATCHED.items():
        if getattr(owner, attr, None) is not _ORIGINAL[name]:
            changed.append(name)
            setattr(owner, attr, _ORIGINAL[name])
    return changed


def install(submission_dir: Path, protected: list[Path]) -> None:
    """Install the audit hook; what it refuses reaches the report as the failing case's message."""
    sub = str(submission_dir.resolve()) + os.sep
    prot = tuple(str(p.resolve()) + os.sep for p in protected)
    forbidden_modules = ("reference", "grader", "attnlab_reference", "_pytest", "pytest")
    paths = sysconfig.get_paths()
    stdlib = (paths["stdlib"] + os.sep, "<frozen ")
    site = (paths["purelib"] + os.sep, paths["platlib"] + os.sep)
    busy = [False]  # the hook's own frame walk must not re-enter it
    getframe = sys._getframe

    def from_submission(direct: bool = False) -> str | None:
        """Where in the submission this event comes from, if it does.

        direct: only the first frame outside the standard library counts (so `Path.write_text` called by
        the submission is the submission's, but a scratch file torch writes while it runs is not).
        """
        f = getframe(2)
        while f is not None:
            fn = f.f_code.co_filename
            if fn.startswith(sub):
                return f"{Path(fn).name}:{f.f_lineno}"
            if direct and (not fn.startswith(stdlib) or fn.startswith(site)):
                return None
            f = f.f_back
        return None

    def refuse(where: str, what: str) -> None:
        msg = f"{what} (at {where})"
        raise Blocked(f"the grader blocked this: {msg}")

    def hook(event: str, args: tuple) -> None:
        if busy[0]:
            return
        if not (event in _NEVER_FROM_SUBMISSION or event in ("open", "import", "object.__setattr__", "object.__delattr__")):
            return
        busy[0] = True
        try:
            if event == "open":
                path, mode, oflags = args
                if isinstance(path, int):
                    return
                path = os.path.abspath(os.fsdecode(path))
                writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(
                    isinstance(oflags, int) and oflags & _WRITE_FLAGS
                )
                guarded = path.startswith(prot)
                if not guarded and not writing:
                    return
                # library code may write scratch files on the submission's behalf; the submission itself
                # may not write, and nobody under it may touch the grader, the reference or the records
                where = from_submission(direct=not guarded)
                if where is None:
                    return
                if writing:
                    refuse(where, f"opened {path!r} for writing")
                refuse(where, f"read the grader or the reference from disk ({Path(path).name})")
                return
            if event == "os.kill" and args[0] in (0, os.getpid()):
                return  # signalling itself only ends its own piece; anything else could hit the grader
            where = from_submission(direct=True)
            if where is None:
                return
            if event == "import":
                name = args[0] or ""
                if name.split(".")[0] in forbidden_modules:
                    refuse(where, f"imported {name!r}")
            elif event in ("object.__setattr__", "object.__delattr__"):
                obj = args[0]
                if isinstance(obj, type) and not str(getattr(obj, "__module__", "")).startswith("attnlab_submission"):
                    refuse(where, f"patched {obj.__module__}.{obj.__qualname__}.{args[1]}")
            else:
                refuse(where, f"called {event}")
        finally:
            busy[0] = False

    sys.addaudithook(hook)
