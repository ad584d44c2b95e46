"""Confine a freshly forked worker before it runs any submission code (Linux; elsewhere a no-op).

Each layer names what it stops; `apply` returns the layers it could not put up, so the judge can
say so once instead of crashing where a kernel lacks one.
"""
from __future__ import annotations

import errno
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.host import resource
from grader.worker import limits as defaults

NOBODY = 65534
CLONE_THREAD = 0x00010000
CLONE_NEWNET = 0x40000000
CLONE_NEWIPC = 0x08000000
F_SETOWN, F_SETSIG, F_SETOWN_EX = 8, 10, 15
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902
# what model code never needs: new programs and processes, other processes' memory, scheduling and
# limits, file metadata (Landlock does not govern it), the machine's own settings, and io_uring (whose
# operations, sockets included, seccomp cannot see)
REFUSED = (
    "execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv", "process_vm_writev", "socket", "pidfd_open",
    "pidfd_getfd", "pidfd_send_signal", "tkill", "kcmp", "setns", "unshare", "mount", "umount2", "pivot_root",
    "chroot", "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "setpriority", "sched_setscheduler", "sched_setparam", "sched_setattr", "ioprio_set", "migrate_pages",
    "move_pages", "set_mempolicy_home_node",
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime", "utimes",
    "utimensat", "futimesat", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    "mknod", "mknodat", "reboot", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "sethostname", "setdomainname", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "swapon",
    "swapoff", "acct", "quotactl", "iopl", "ioperm", "syslog", "vhangup", "name_to_handle_at", "open_by_handle_at",
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "setfsuid", "setfsgid",
    "capset", "personality", "io_uring_setup", "io_uring_enter", "io_uring_register",
    # channels between workers, which may run at once and must not share anything: System V and POSIX IPC,
    # locks and leases on files every worker can read, watching those files' accesses, and the page cache's
    # state (residency, advice, read-ahead) as a shared bit store
    "shmget", "shmat", "shmdt", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop",
    "semctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr", "flock",
    "inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_init", "fanotify_mark", "fadvise64",
    "mincore", "readahead", "cachestat", "process_madvise",
    # a thread's CPU affinity is readable by any process that knows its id: a per-thread bit store; the
    # machine's task count and free memory (sysinfo) are a counter any worker can move and all can read
    "sched_setaffinity", "sysinfo",
    # sockets of any kind, not only socket(): a pair of its own (nothing a worker needs), and the worker's one
    # connected socket re-aimed (connect(AF_UNSPEC) then connect: on the no-fork path a TCP socket reaches any
    # port of the host), bound or listened on; sendmsg carries an address or MSG_FASTOPEN seccomp cannot see
    # (sendto's are checked below); the worker only sends and receives on the socket it was given
    "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendmsg", "sendmmsg",
    # Linux AIO: operations seccomp cannot see (a read with RWF_NOWAIT asks whether a page is cached), and a
    # machine-wide count of AIO contexts (/proc/sys/fs/aio-nr); torch and glibc's POSIX aio (threads) never use it
    "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
    # secret memory is locked memory: the machine-wide counter mlock moves (refused below)
    "memfd_secret",
)
# memfd_create: an anonymous file a worker never needs, refused where there is no GPU; CUDA's driver creates
# one at start (cuInit fails without it), so on a GPU machine it stays, empty (RLIMIT_FSIZE 0: it cannot grow)
GPU_ONLY = ("memfd_create",)
MSG_FASTOPEN = 0x20000000  # sendto on an unconnected TCP socket with this flag connects it
# madvise advice that loads or evicts pages of the shared page cache (WILLNEED, COLD, PAGEOUT, POPULATE_READ,
# POPULATE_WRITE, COLLAPSE): a page's residency, set by one worker and timed by another, would be a reusable bit
MADV_CACHE = (3, 20, 21, 22, 23, 25)
RWF_NOWAIT = 0x8  # preadv2's flag that asks whether a page is cached without reading it: the same bit, read
# futex operations that wake or requeue waiters of a shared futex: a futex on a page of a file every worker maps
# is keyed by the file, not the process, so a shared wake is a signal to another worker. Private operations
# (FUTEX_PRIVATE_FLAG, 128: every lock within the process) and plain waits stay allowed.
FUTEX_SHARED_WAKES = (1, 3, 4, 5, 6, 7, 8, 10, 12, 13)  # WAKE, REQUEUE, CMP_REQUEUE, WAKE_OP, *_PI, WAKE_BITSET
# what a process can read of another by its id (affinity, group, session, scheduling, priority): a worker asks
# only about itself (0), never about another worker, whose state would otherwise be a channel
BY_PID_GETTERS = ("sched_getaffinity", "getpgid", "getsid", "sched_getparam", "sched_getscheduler", "sched_getattr",
                  "sched_rr_get_interval", "get_robust_list")
BY_WHO_GETTERS = ("getpriority", "ioprio_get")  # (which, who): who 0 is this process
# fcntl commands that lock, lease or watch a file (the lock state of a file others can open is a channel)
F_LOCKS = (5, 6, 7, 36, 37, 38, 1024, 1025, 1026)  # F_GETLK/SETLK/SETLKW, F_OFD_*, F_SETLEASE/GETLEASE, F_NOTIFY


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
        missing += enter_cgroups(limits.threads)
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
    if not _seccomp(gpu):
        missing.append("seccomp")
    return missing


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


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


def enter_cgroups(limit: int) -> list[str]:
    """Move this worker into cgroups of its own: at most `limit` tasks, threads included (a thread bomb fails
    here, not in the machine's process table; RLIMIT_NPROC binds no uid 0), and one CPU (a worker's threads
    cannot starve another student's training). Root only; returns the layers it could not put up."""
    missing = []
    for layer, choices in _cgroups(limit).items():
        if not any(_enter(root, files, controller) for root, files, controller in choices):
            missing.append(layer)
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


def leave_cgroups(pid: int) -> None:
    """Remove a finished worker's cgroups (the worker server calls this once it has reaped the worker)."""
    for root in _roots():
        try:
            os.rmdir(_group(root, pid))
        except OSError:
            pass


def sweep_cgroups(older_than: float = 60.0) -> None:
    """Remove the empty cgroups of workers whose server never reaped them (killed with its judge): a cgroup with
    a task in it cannot be removed, so a live worker's stays."""
    import time

    for root in _roots():
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


def _roots() -> set[str]:
    return {root for choices in _cgroups(0).values() for root, _, _ in choices}


def _unshare(flag: int) -> bool:
    """A new namespace: network (no interfaces but a downed loopback: nothing to reach) or IPC (empty)."""
    try:
        return _libc().unshare(flag) == 0
    except (OSError, AttributeError):
        return False


def _drop_capabilities() -> bool:
    """Empty the bounding, effective, permitted and inheritable capability sets of this process."""
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


def _seccomp(gpu: bool = False) -> bool:
    """Refuse new programs, new processes, tracing, other processes' memory, signals to others and sockets."""
    try:
        import pyseccomp as sc
    except (ImportError, OSError):
        return False
    try:
        f = sc.SyscallFilter(defaction=sc.ALLOW)
        deny = sc.ERRNO(errno.EPERM)
        for name in REFUSED:
            try:
                f.add_rule(deny, name)
            except (ValueError, OSError, RuntimeError):
                pass  # not a syscall on this architecture
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # its flags are out of seccomp's sight; libc falls back to clone
        f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))  # threads yes, processes no
        me = os.getpid()
        for name in ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
            f.add_rule(deny, name, sc.Arg(0, sc.NE, me))
        for name in ("prlimit64", *BY_PID_GETTERS):  # 0 is this process; any other pid is someone else's
            f.add_rule(deny, name, sc.Arg(0, sc.NE, 0))
        for name in BY_WHO_GETTERS:
            f.add_rule(deny, name, sc.Arg(1, sc.NE, 0))
        for advice in MADV_CACHE:
            f.add_rule(deny, "madvise", sc.Arg(2, sc.EQ, advice))
        f.add_rule(deny, "preadv2", sc.Arg(5, sc.MASKED_EQ, RWF_NOWAIT, RWF_NOWAIT))  # "is it cached?" without a read
        for name in ("mlock", "mlock2", "mlockall"):  # locked memory moves a machine-wide counter
            f.add_rule(deny, name)
        if not gpu:
            for name in GPU_ONLY:
                f.add_rule(deny, name)
        # send() is sendto(fd, buf, len, flags, NULL, 0): an address, or a fast-open connect, is refused
        f.add_rule(deny, "sendto", sc.Arg(4, sc.NE, 0))
        f.add_rule(deny, "sendto", sc.Arg(3, sc.MASKED_EQ, MSG_FASTOPEN, MSG_FASTOPEN))
        for op in FUTEX_SHARED_WAKES:  # the low byte holds the operation and the private flag
            f.add_rule(deny, "futex", sc.Arg(1, sc.MASKED_EQ, 0xFF, op))
        for name in ("futex_wake", "futex_requeue", "futex_waitv"):  # futex2 (Linux 6.7): glibc falls back
            try:
                f.add_rule(sc.ERRNO(errno.ENOSYS), name)
            except (ValueError, OSError, RuntimeError):
                pass  # unknown to this libseccomp
        # an owner for SIGIO (and the signal it sends) would let a write signal any process
        for cmd in (F_SETOWN, F_SETSIG, F_SETOWN_EX, *F_LOCKS):
            f.add_rule(deny, "fcntl", sc.Arg(1, sc.EQ, cmd))
        for req in (FIOSETOWN, SIOCSPGRP):
            f.add_rule(deny, "ioctl", sc.Arg(1, sc.EQ, req))
        f.load()  # libseccomp sets PR_SET_NO_NEW_PRIVS first
        return True
    except Exception:  # noqa: BLE001
        return False
