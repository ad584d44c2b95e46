"""A stopped run ends its processes on every platform: with process groups and SIGKILL where the OS has them, and
with os.kill's SIGTERM (TerminateProcess on Windows) where it has neither."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from grader.runner import stops

from helpers import eventually

linux_only = pytest.mark.skipif(not os.path.isdir("/proc"), reason="end_tree finds a tree's processes in /proc")

# a parent that starts a sleeping child, says its pid, and sleeps: end_tree(root=parent) must end the child
_PARENT = ("import subprocess, sys, time\n"
           "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
           "print(child.pid, flush=True)\n"
           "time.sleep(60)\n")


def _tree() -> tuple[subprocess.Popen, int]:
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True)
    return parent, int(parent.stdout.readline())


def _gone(pid: int) -> bool:
    return pid not in stops.descendants(os.getpid())


@linux_only
def test_end_tree_kills_every_process_below_the_root_and_spares_the_root():
    parent, child = _tree()
    try:
        assert child in stops.descendants(parent.pid)
        assert stops.end_tree(parent.pid, patience=5) == 1
        assert eventually(lambda: _gone(child), within=5)
        assert parent.poll() is None
    finally:
        parent.kill()
        parent.wait()


@linux_only
def test_without_process_groups_end_tree_terminates_each_process_as_windows_does(monkeypatch):
    for name in ("killpg", "getpgid"):  # what the no-fork stand-in takes away, as Windows lacks them
        monkeypatch.delattr(os, name)
    sent = []
    kill = os.kill
    monkeypatch.setattr(os, "kill", lambda pid, sig: (sent.append(sig), kill(pid, sig)))
    parent, child = _tree()
    try:
        assert stops.end_tree(parent.pid, patience=5) == 1
        assert eventually(lambda: _gone(child), within=5)
        assert set(sent) == {signal.SIGTERM}
    finally:
        parent.kill()
        parent.wait()
