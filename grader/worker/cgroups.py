"""The worker's cgroups: a CPU quota of one core, a memory cap and a task count, each in a group of its own that
the worker enters before it is jailed (cgroup v1's hierarchies first, then v2's), and the groups' removal."""
from __future__ import annotations

import os

CPU_PERIOD = "100000"  # microseconds; a quota of one period per period is one CPU


def _cgroups(limit: int) -> dict[str, list[tuple[str, dict[str, str], str]]]:
    """{layer: [(hierarchy root, {file: value}, controller)]}: cgroup v1's own hierarchy first, then v2's."""
    return {
        "process limit": [("/sys/fs/cgroup/pids", {"pids.max": str(limit)}, "pids"),
                          ("/sys/fs/cgroup", {"pids.max": str(limit)}, "pids")],
        "CPU quota": [("/sys/fs/cgroup/cpu", {"cpu.cfs_period_us": CPU_PERIOD, "cpu.cfs_quota_us": CPU_PERIOD}, "cpu"),
                      ("/sys/fs/cgroup", {"cpu.max": f"{CPU_PERIOD} {CPU_PERIOD}"}, "cpu")],
    }


def _group(root: str, pid: int) -> str:
    return os.path.join(root, "attnlab", f"w{pid}")


# cgroup v1's CPU accounting: the judge reads the worker's CPU time from it (grader.judge.cpuclock), exited threads
# included; not a layer of the jail (v2's CPU quota group above already counts it, in its cpu.stat)
ACCOUNTING = ("/sys/fs/cgroup/cpuacct", {"cpuacct.usage": "0"}, "cpuacct")


def enter(limit: int) -> list[str]:
    """Move this worker into cgroups of its own: at most `limit` tasks, threads included (a thread bomb fails
    here, not in the machine's process table; RLIMIT_NPROC binds no uid 0), and one CPU (a worker's threads
    cannot starve another student's training). Root only; returns the layers it could not put up."""
    missing = []
    for layer, choices in _cgroups(limit).items():
        if not any(_enter(root, files, controller) for root, files, controller in choices):
            missing.append(layer)
    _enter(*ACCOUNTING)
    return missing


def _enter(root: str, files: dict[str, str], controller: str) -> bool:
    path = _group(root, os.getpid())
    try:
        os.makedirs(path, exist_ok=True)
        if not os.path.exists(os.path.join(path, next(iter(files)))):  # v2: enable the controller above it
            for parent in (root, os.path.dirname(path)):
                with open(os.path.join(parent, "cgroup.subtree_control"), "w") as f:
                    f.write(f"+{controller}")
        for name, value in files.items():
            with open(os.path.join(path, name), "w") as f:
                f.write(value)
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write("0")  # this process
        return True
    except OSError:
        try:
            os.rmdir(path)
        except OSError:
            pass
        return False


def leave(pid: int) -> None:
    """Remove a finished worker's cgroups (the worker server calls this once it has reaped the worker)."""
    for root in roots():
        try:
            os.rmdir(_group(root, pid))
        except OSError:
            pass


def sweep(older_than: float = 60.0) -> None:
    """Remove the empty cgroups of workers whose server never reaped them (killed with its judge): a cgroup with
    a task in it cannot be removed, so a live worker's stays."""
    import time

    for root in roots():
        top = os.path.join(root, "attnlab")
        try:
            names = os.listdir(top)
        except OSError:
            continue
        for name in names:
            path = os.path.join(top, name)
            try:
                if name.startswith("w") and time.time() - os.stat(path).st_mtime > older_than:
                    os.rmdir(path)
            except OSError:
                pass


def roots() -> set[str]:
    return {root for choices in _cgroups(0).values() for root, _, _ in choices} | {ACCOUNTING[0]}
