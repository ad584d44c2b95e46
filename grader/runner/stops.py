"""A run told to stop: SIGTERM (Slurm or Kubernetes at a time limit or a preemption) or SIGINT (Ctrl-C).

`Stop` catches either while a run lasts, `until_stopped` runs the work on a thread of its own so that the main
thread, which alone hears signals, only ever waits, and `end_tree` ends every process the run started, down to the
last worker. The fork servers end their own children when their parent dies as well (grader.worker.worker_forkserver's
`die_with_parent`): a run killed outright (SIGKILL) leaves nothing behind either.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable

from grader.core.host import signal_name

SIGNALS = (signal.SIGTERM, signal.SIGINT)
PR_SET_CHILD_SUBREAPER = 36


class Stop:
    """While entered (in the main thread), SIGTERM and SIGINT set `signum` instead of ending the process."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old: dict[int, object] = {}

    def __enter__(self) -> Stop:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._old[sig] = signal.signal(sig, self._caught)
        return self

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()

    def _caught(self, signum: int, frame) -> None:
        # no lock, no I/O: the handler may run inside any bytecode of the main thread
        if self.signum is None:
            self.signum = signum

    def wait(self, seconds: float) -> bool:
        """Whether a signal comes within `seconds`: a process group stopped at once reaches a fork server first."""
        end = time.monotonic() + seconds
        while not self.stopped and time.monotonic() < end:
            time.sleep(0.02)
        return self.stopped

    @property
    def stopped(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        return signal_name(self.signum) if self.signum else ""

    @property
    def code(self) -> int:
        """The shell's exit code for a process its signal ended: 143 for SIGTERM, 130 for SIGINT."""
        return 128 + (self.signum or 0)


def until_stopped(work: Callable[[], None], stop: Stop) -> threading.Thread | None:
    """work() on a thread of its own; None once it is done, or, when `stop` was signalled first, that thread, still
    running: the caller ends what it waits on (`end_tree`) and joins it. An exception of work's is raised here."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as e:  # noqa: BLE001 - raised again in the main thread below
            raised.append(e)

    thread = threading.Thread(target=run, name="batch-launch", daemon=True)
    thread.start()
    # joined in short waits: a handler that set an Event could deadlock on the Event's own lock
    while thread.is_alive() and not stop.stopped:
        thread.join(0.1)
    if stop.stopped:
        return thread
    if raised:
        raise raised[0]
    return None


def _children() -> dict[int, list[int]]:
    """Every live (not zombie) process's children, from /proc; empty where there is none."""
    kids: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return kids
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # the name in parentheses may hold spaces
        if len(fields) > 1 and fields[0] != "Z":
            kids.setdefault(int(fields[1]), []).append(int(entry))
    return kids


def descendants(root: int) -> list[int]:
    """Every live process below `root`, parents before their children."""
    kids, found, todo = _children(), [], [root]
    while todo:
        for child in kids.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _subreaper() -> None:
    """Orphans of the processes killed next become this process's children (Linux), so the next scan sees them."""
    if sys.platform != "linux":  # prctl is Linux's
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _own_group() -> int | None:
    """This process's group, which `_kill` spares; None where the OS has no process groups (Windows)."""
    if sys.platform != "win32" and hasattr(os, "getpgid"):  # hasattr too: the no-fork stand-in takes it away
        return os.getpgid(0)
    return None


def _kill(pid: int, own_group: int | None) -> None:
    """End `pid` at once, and the process group it leads where there are groups (a judge or worker leads its own)."""
    if sys.platform != "win32" and hasattr(os, "killpg"):
        if os.getpgid(pid) == pid != own_group:
            os.killpg(pid, signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)
    else:
        os.kill(pid, signal.SIGTERM)  # Windows has no SIGKILL: os.kill calls TerminateProcess whatever the signal


def end_tree(root: int | None = None, patience: float = 5.0) -> int:
    """SIGKILL every process below `root` (this one), their process groups too (a judge or worker leads its own),
    scanning again until none is left or `patience` seconds pass; returns how many were killed."""
    root = os.getpid() if root is None else root
    if root == os.getpid():
        _subreaper()
    own_group, killed, end = _own_group(), set(), time.monotonic() + patience
    while time.monotonic() < end:
        alive = descendants(root)
        if not alive:
            break
        for pid in alive:
            try:
                _kill(pid, own_group)
                killed.add(pid)
            except OSError:
                pass  # gone already
        time.sleep(0.02)
    return len(killed)


def end_all(judge_servers: list, pool, running: threading.Thread | None, patience: float = 30.0) -> None:
    """A stopped run's processes ended and its grading threads with them: the fork servers first (JudgeServer.kill), so
    that no thread starts a judge of its own in their place, then everything below this process; the pool's
    queued work dropped, and the thread `until_stopped` left running joined."""
    for z in judge_servers:
        z.kill()
    end_tree()
    pool.shutdown(wait=False, cancel_futures=True)
    if running is not None:
        running.join(patience)  # with their processes gone, the grading threads end at once
    end_tree()  # what a thread started meanwhile


def leave(stop: Stop, done: int, total: int, files) -> None:
    """The one line a stopped run ends with, and the exit a shell expects of its signal (143, 130)."""
    print(f"stopped by {stop.name} after {done} of {total} students; rerun the same command to resume: the finished "
          f"students are kept (in {files.csv} and {files.journal.name})", file=sys.stderr, flush=True)
    raise SystemExit(stop.code)
