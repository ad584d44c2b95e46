"""Confine a freshly forked worker before it runs any submission code (Linux; elsewhere a no-op).

Each layer names what it stops; `apply` returns the layers it could not put up, so the judge can
say so once instead of crashing where a kernel lacks one.
"""
from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.core.host import resource
from grader.worker import cgroups, syscalls
from grader.worker import limits as defaults

NOBODY = 65534
CLONE_NEWNET = 0x40000000
CLONE_NEWIPC = 0x08000000


@dataclass(frozen=True)
class JailLimits:
    memory_gb: float = defaults.MEMORY_GB
    cpu_seconds: int = defaults.JAIL_CPU_SECONDS
    open_files: int = defaults.OPEN_FILES
    threads: int = defaults.THREADS


def apply(keep_fds: tuple[int, ...], limits: JailLimits, readable: list[str]) -> list[str]:
    """Close every other descriptor, cap resources, cut the network, drop root, Landlock, then seccomp."""
    missing: list[str] = []
    if resource is None:  # Windows: no descriptors to sweep, no limits; the judge's deadlines still hold
        missing.append("resource limits")
    else:
        _close_all_but(keep_fds)
        _rlimits(limits)
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE fails instead of killing
    if sys.platform != "linux":
        return missing + ["seccomp", "landlock", "network namespace"]
    if os.geteuid() == 0:
        if not _unshare(CLONE_NEWNET):
            missing.append("network namespace")
        if not _unshare(CLONE_NEWIPC):  # System V and POSIX IPC of its own, gone with it (seccomp refuses them too)
            missing.append("IPC namespace")
        missing += cgroups.enter(limits.threads)
        if nobody_can_read_interpreter():
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)  # leaves no capability behind
        else:
            missing.append("unprivileged uid")  # why, in words: grader/runner/summary.py GAP_WORDS
            if not _drop_capabilities():  # still uid 0, but with none of root's powers
                missing.append("capabilities")
    gpu = bool(gpu_devices())  # looked up before Landlock closes /dev to the listing
    if not _landlock(readable):
        missing.append("landlock")
    if not syscalls.install(gpu):
        missing.append("seccomp")
    return missing


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _unshare(flag: int) -> bool:
    """A new namespace: network (no interfaces but a downed loopback: nothing to reach) or IPC (empty)."""
    try:
        return _libc().unshare(flag) == 0
    except (OSError, AttributeError):
        return False


def _drop_capabilities() -> bool:
    """Empty the bounding, effective, permitted and inheritable capability sets of this process."""
    if sys.platform != "linux":  # capabilities and these calls' numbers are Linux's (apply() asks only there)
        return False
    import ctypes

    try:
        libc = _libc()
        for cap in range(64):
            libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP; past the last capability it just fails
        libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
        data = (ctypes.c_uint32 * 6)()  # two (effective, permitted, inheritable) triples, all zero
        done = libc.syscall(126 if os.uname().machine == "x86_64" else 91, header, data) == 0  # capset
        ctypes.set_errno(0)  # the landlock package reads errno, not just return values
        return done
    except (OSError, AttributeError):
        return False


def _close_all_but(keep: tuple[int, ...]) -> None:
    if sys.platform == "win32":  # no `resource` there: apply() sweeps nothing
        return
    top = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    top = 65536 if top == resource.RLIM_INFINITY else min(top, 65536)
    low = 3
    for fd in sorted(k for k in keep if k >= 3):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, top)


NVIDIA_INFO = ("/proc/driver/nvidia", "/sys/bus/pci", "/sys/devices", "/sys/module/nvidia")


def gpu_devices() -> list[str]:
    """The NVIDIA device nodes CUDA opens (none where there is no GPU): a worker may use these and nothing else."""
    import glob

    return sorted(glob.glob("/dev/nvidia*"))


def _rlimits(limits: JailLimits) -> None:
    if sys.platform == "win32":  # no `resource` there: apply() says "resource limits" are missing instead
        return
    cap = int(limits.memory_gb * 2**30)
    # CUDA reserves far more address space than it touches: with a GPU the cap is on data, not address space
    space = resource.RLIMIT_DATA if gpu_devices() else resource.RLIMIT_AS
    for res, value in (
        (space, cap),
        (resource.RLIMIT_FSIZE, 0),  # no file grows: the worker has nothing to write
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_MEMLOCK, 0),
        (resource.RLIMIT_NPROC, limits.threads),  # threads count here too; processes are refused by seccomp
    ):
        try:
            resource.setrlimit(res, (value, value))
        except (ValueError, OSError):
            pass


def nobody_can_read_interpreter() -> bool:
    """Whether a worker dropped to `nobody` could still import: a venv readable over a private base is not enough."""
    return all(_world_readable(p) for p in interpreter_paths())


def interpreter_paths() -> list[str]:
    """Every place the interpreter reads from: a venv's prefix and the base interpreter's under it, and sys.path."""
    from grader import ROOT  # the lab's own folder is closed to workers anyway (Landlock)

    lab = os.path.realpath(ROOT)
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.dirname(sys.executable),
             *sys.path]
    real = {os.path.realpath(p) for p in found if p and os.path.exists(p)}
    return sorted(p for p in real if p != lab and not p.startswith(lab + os.sep))


def _world_readable(path: str) -> bool:
    """Whether `nobody` can read `path`: every folder on the way open (r-x), a file readable."""
    p = Path(path).resolve()
    for part in [p, *p.parents]:
        try:
            mode = part.stat().st_mode
        except OSError:
            return False
        need = 0o005 if part.is_dir() else 0o004
        if mode & need != need:
            return False
    return True


def _landlock(readable: list[str]) -> bool:
    """Read-only access to the interpreter and its libraries; nothing else, written or read."""
    try:
        from landlock import FSAccess, Ruleset
    except ImportError:
        return False
    try:
        rs = Ruleset()
        read = FSAccess.EXECUTE | FSAccess.READ_FILE | FSAccess.READ_DIR
        for path in readable:
            try:
                rs.allow(path, rules=read if os.path.isdir(path) else FSAccess.EXECUTE | FSAccess.READ_FILE)
            except OSError:
                continue
        rs.allow("/dev/null", rules=FSAccess.READ_FILE | FSAccess.WRITE_FILE)
        _allow_gpu(rs, FSAccess)
        rs.apply()
        os.close(rs._fd)  # the ruleset's descriptor is not needed once applied: the worker keeps only its own
        return True
    except Exception:  # noqa: BLE001 - an old kernel without Landlock, or a library mismatch
        return False


def _allow_gpu(rs, FSAccess) -> None:
    """CUDA's device nodes (read, write, ioctl) and the driver's read-only machine information; no other file."""
    devices = gpu_devices()
    if not devices:
        return
    use = FSAccess.all_file() & (FSAccess.READ_FILE | FSAccess.WRITE_FILE | FSAccess.IOCTL_DEV)
    for path in devices:
        try:
            rs.allow(path, rules=use | FSAccess.READ_DIR if os.path.isdir(path) else use)
        except OSError:
            continue
    for path in NVIDIA_INFO:
        if os.path.exists(path):
            rs.allow(path, rules=FSAccess.READ_FILE | FSAccess.READ_DIR)
