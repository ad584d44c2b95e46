"""What the kernel accounts to a worker, read by the judge from outside it: the CPU time the worker spent, and the
time it waited for a CPU while ready to run. A busy machine changes neither the first (much) nor a verdict built
on it, and the second is exactly what the machine took from the worker, which its deadlines give back.

Nothing here asks the worker: a count or a timing it reported could be forged. Where the kernel says nothing
(no /proc: Windows, macOS), `spent` falls back to the judge's wall clock and `waited` to zero, as before.

- The CPU time is the worker's own cgroup's (`cpuacct.usage`, cgroup v1, or `cpu.stat`'s `usage_usec`, v2) where
  the jail put it in one (root): every thread it ever ran, exited ones included. Otherwise it is the sum over its
  live threads (/proc/PID/task/*/schedstat, in nanoseconds), and no less than the whole thread group's ticks
  (/proc/PID/stat) less two ticks of rounding: a thread that did its work and exited before the answer still
  counts, to within those two ticks.
- The wait is the sum of its live threads' run delay (schedstat's second field).
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import NamedTuple

if sys.platform != "win32":
    TICK = 1.0 / os.sysconf("SC_CLK_TCK")  # seconds of one tick of /proc/PID/stat
else:
    TICK = 0.01
# where grader.worker.cgroups puts a worker (cgroups.GROUP): v1's accounting hierarchy, then v2's unified one
_GROUPS = (("/sys/fs/cgroup/cpuacct/attnlab/w{pid}/cpuacct.usage", 1e-9, None),
           ("/sys/fs/cgroup/attnlab/w{pid}/cpu.stat", 1e-6, "usage_usec"))


class Reading(NamedTuple):
    """One look at a process: seconds of CPU by each source (None where it says nothing), and the wall clock."""

    group: float | None  # its cgroup's usage
    threads: float | None  # its live threads' schedstat, summed
    ticks: float | None  # its thread group's utime + stime
    waited: float  # its live threads' run delay, summed
    wall: float


def _group_usage(pid: int) -> float | None:
    for pattern, unit, key in _GROUPS:
        try:
            text = Path(pattern.format(pid=pid)).read_text()
        except OSError:
            continue
        if key is None:
            return int(text) * unit
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value) * unit
    return None


def _threads(pid: int | str) -> tuple[float | None, float]:
    """(seconds on a CPU, seconds waiting for one) of every live thread of `pid`."""
    ran = waited = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None, 0.0
    for tid in tids:
        try:
            fields = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
        except OSError:
            continue  # exited meanwhile: the ticks below keep its time
        ran += int(fields[0])
        waited += int(fields[1])
    return ran * 1e-9, waited * 1e-9


def _ticks(pid: int | str) -> float | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()  # the command name may hold spaces and parentheses
    return (int(fields[11]) + int(fields[12])) * TICK  # utime and stime, the 14th and 15th fields


def read(pid: int) -> Reading:
    """What the kernel says of `pid` now."""
    ran, waited = _threads(pid)
    return Reading(_group_usage(pid), ran, _ticks(pid), waited, time.monotonic())


def spent(before: Reading, after: Reading) -> float:
    """Seconds of CPU the process spent between two readings: its cgroup's, else its threads' (no less than its
    ticks less two), else the wall clock's."""
    if before.group is not None and after.group is not None:
        return after.group - before.group
    if before.threads is not None and after.threads is not None:
        live = after.threads - before.threads
        if before.ticks is not None and after.ticks is not None:
            live = max(live, after.ticks - before.ticks - 2 * TICK)
        return max(live, 0.0)
    return after.wall - before.wall


def waited(pid: int | str) -> float:
    """Seconds the live threads of `pid` have waited, ready to run, for a CPU the machine gave to others."""
    return _threads(pid)[1]
