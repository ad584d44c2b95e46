"""The judge's reading of a worker's CPU time and of its wait for a CPU (grader.judge.cpuclock): what a busy machine
does not move, and what a worker cannot hide by working in a thread that is gone before it answers."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from grader.judge import cpuclock

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's accounting is read in /proc")

READY = "import sys, threading, time\nsys.stdout.write('ready\\n'); sys.stdout.flush()\nsys.stdin.readline()\n"


def child(work: str) -> subprocess.Popen:
    """A process that waits for a line on stdin, then runs `work`, then waits for another line before it exits."""
    code = READY + work + "\nsys.stdout.write('done\\n'); sys.stdout.flush()\nsys.stdin.readline()\n"
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "ready\n"
    return p


def measured(work: str) -> tuple[float, float]:
    """(CPU seconds the judge reads for `work` in another process, its wall seconds)."""
    p = child(work)
    try:
        before = cpuclock.read(p.pid)
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline() == "done\n"
        after = cpuclock.read(p.pid)
        return cpuclock.spent(before, after), after.wall - before.wall
    finally:
        p.kill()
        p.wait()


SPIN = "end = time.process_time() + 0.4\nwhile time.process_time() < end:\n    pass\n"


def test_a_busy_worker_is_charged_the_cpu_it_spent():
    cpu, wall = measured(SPIN)
    assert 0.35 < cpu <= wall + 0.05


def test_a_sleeping_worker_is_charged_almost_nothing():
    cpu, wall = measured("time.sleep(0.4)")
    assert wall >= 0.4 and cpu < 0.05


def test_work_done_in_a_thread_that_exited_before_the_answer_is_still_charged():
    cpu, _ = measured("t = threading.Thread(target=lambda: exec(" + repr(SPIN) + ", {'time': time}))\n"
                      "t.start()\nt.join()\n")
    assert cpu > 0.4 - 2 * cpuclock.TICK - 0.02  # to within the two ticks /proc/PID/stat rounds to


def test_a_worker_kept_from_the_cpu_by_busy_neighbours_is_told_so_by_its_wait():
    hogs = [subprocess.Popen([sys.executable, "-c", "while True:\n    pass\n"]) for _ in range(4)]
    try:
        p = child(SPIN)
        try:
            before = cpuclock.waited(p.pid)
            p.stdin.write("go\n")
            p.stdin.flush()
            start = time.monotonic()
            assert p.stdout.readline() == "done\n"
            wall, waited = time.monotonic() - start, cpuclock.waited(p.pid) - before
        finally:
            p.kill()
            p.wait()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert waited > 0.1 and wall - waited < 0.4 + 0.2  # what it waited is what the wall clock added to its work


def test_without_proc_the_wall_clock_is_the_measure():
    a = cpuclock.Reading(None, None, None, 0.0, 10.0)
    b = cpuclock.Reading(None, None, None, 0.0, 10.5)
    assert cpuclock.spent(a, b) == 0.5


def test_a_worker_gone_between_two_readings_is_not_charged_less_than_nothing():
    a = cpuclock.Reading(None, 2.0, 1.0, 0.0, 0.0)
    b = cpuclock.Reading(None, 0.5, 1.0, 0.0, 1.0)  # its busiest thread exited: the ticks did not move
    assert cpuclock.spent(a, b) == 0.0
