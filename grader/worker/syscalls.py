"""The worker's seccomp filter: the system calls model code never needs, refused (EPERM) before any submission
code runs, and what each refusal closes (grader.worker.jail applies it last, after Landlock)."""
from __future__ import annotations

import errno
import os

CLONE_THREAD = 0x00010000
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


def install(gpu: bool = False) -> bool:
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
