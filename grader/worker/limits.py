"""The grader's default limits, in one place: the lowest floor that needs them (the jail), and above it the judge
(its options, its deadlines) and the parent (`grader.runner.results.Limits`, the command line's defaults) import
them from here. Plain numbers: nothing to import, nothing a worker could learn from them."""
from __future__ import annotations

CASE_TIMEOUT = 15.0  # seconds one case may take; a case takes well under a second, the training case has its own limit
PIECE_TIMEOUT = 1200.0  # seconds one piece's judge may run, its training case included
MEMORY_GB = 6.0  # address space of each worker (RLIMIT_AS) and of each judge
CPU_MARGIN = 60  # CPU seconds a worker is given beyond its piece's timeout (see worker_cpu_seconds)

# the jail's own (grader.worker.jail.JailLimits)
JAIL_CPU_SECONDS = 1800  # RLIMIT_CPU of a worker started without a piece's timeout to follow
OPEN_FILES = 64  # RLIMIT_NOFILE
THREADS = 256  # tasks, threads included: RLIMIT_NPROC and the worker's pids cgroup

# the judge's deadlines around a case (grader.judge.plugin)
HUNG_TIMEOUT = 3.0  # seconds left to each later case of a piece once one of its cases timed out
THREAD_BACKSTOP = 60.0  # seconds past a case's own deadline before pytest-timeout's thread method ends the judge


def worker_cpu_seconds(piece_timeout: float) -> int:
    """A worker's CPU-time limit (RLIMIT_CPU), which follows from its piece's timeout."""
    return int(piece_timeout) + CPU_MARGIN
