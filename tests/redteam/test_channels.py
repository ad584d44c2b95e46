"""Channels between workers and out of them: shared kernel objects and locks, sockets (io_uring's too), and a
hostile student's noise on every descriptor beside the next students in a batch. Each hostile file reports
what it managed in its printed output; the tests assert that every attempt was refused and that the honest
score stands."""
from __future__ import annotations

import re
import socket

import pytest

from grader.worker import jail

from helpers import QUICK

from .harness import FULL, LOOSE, full_marks, hostile, judge, run_batch

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

PROBE = '''
import ctypes as _ct
import errno as _errno
import fcntl as _fcntl
import os as _os2

_libc = _ct.CDLL(None, use_errno=True)
_got = {}


def _try(name, fn):
    try:
        r = fn()
        _got[name] = "ok" if not isinstance(r, int) or r >= 0 else _errno.errorcode.get(_ct.get_errno(), "?")
    except OSError as e:
        _got[name] = _errno.errorcode.get(e.errno, "?")
    except Exception as e:
        _got[name] = type(e).__name__


_lib = _os2.open(_os2.__file__, _os2.O_RDONLY)  # a file every worker can read
_try("shmget", lambda: _libc.shmget(0x4154544e, 4096, 0o1666))
_try("msgget", lambda: _libc.msgget(0x4154544e, 0o1666))
_try("semget", lambda: _libc.semget(0x4154544e, 1, 0o1666))
_try("mq_open", lambda: _libc.mq_open(b"/attnlab", _os2.O_CREAT | _os2.O_RDWR, 0o666, None))
_try("flock", lambda: _fcntl.flock(_lib, _fcntl.LOCK_SH | _fcntl.LOCK_NB))
_try("lockf", lambda: _fcntl.lockf(_lib, _fcntl.LOCK_SH | _fcntl.LOCK_NB))
_try("getlk", lambda: _fcntl.fcntl(_lib, 5, bytes(32)))
_try("fadvise", lambda: _os2.posix_fadvise(_lib, 0, 0, _os2.POSIX_FADV_DONTNEED))
_try("readahead", lambda: _libc.readahead(_lib, _ct.c_long(0), _ct.c_size_t(4096)))
_try("inotify", lambda: _libc.inotify_init1(0))
_buf = _ct.create_string_buffer(8)
_page = _ct.c_void_p(_ct.addressof(_buf) & ~4095)
_try("mincore", lambda: _libc.mincore(_page, _ct.c_size_t(4096), _buf))
_try("posix_shm", lambda: _os2.open("/dev/shm/attnlab", _os2.O_CREAT | _os2.O_RDWR, 0o666))
_try("setaffinity", lambda: _os2.sched_setaffinity(0, _os2.sched_getaffinity(0)))
_try("getaffinity_other", lambda: _os2.sched_getaffinity(1))
_try("getpgid_other", lambda: _os2.getpgid(1))
_try("getsid_other", lambda: _os2.getsid(1))
_try("getpriority_other", lambda: _os2.getpriority(_os2.PRIO_PROCESS, 1))
_try("sched_param_other", lambda: _os2.sched_getparam(1))
_libc.mmap.restype = _ct.c_void_p
_libc.mmap.argtypes = [_ct.c_void_p, _ct.c_size_t, _ct.c_int, _ct.c_int, _ct.c_int, _ct.c_long]
_map = _libc.mmap(None, 4096, 1, 1, _lib, 0)  # PROT_READ, MAP_SHARED: the same page every worker maps
_try("futex_shared_wake", lambda: _libc.syscall(202, _ct.c_void_p(_map + 1024), 1, 1, None, None, 0))
_try("futex_private_wake", lambda: _libc.syscall(202, _ct.c_void_p(_map + 1024), 1 | 128, 1, None, None, 0))
_try("sysinfo", lambda: _libc.sysinfo(_ct.create_string_buffer(128)))
_try("madvise_pageout", lambda: _libc.madvise(_ct.c_void_p(_map), _ct.c_size_t(4096), 21))
_try("madvise_willneed", lambda: _libc.madvise(_ct.c_void_p(_map), _ct.c_size_t(4096), 3))
_try("preadv2_nowait", lambda: _os2.preadv(_lib, [bytearray(16)], 0, 8))  # RWF_NOWAIT
_try("mlock", lambda: _libc.mlock(_ct.c_void_p(_map), _ct.c_size_t(4096)))
_try("meminfo", lambda: open("/proc/meminfo").read(10) and None)
print("CHANNELS " + repr(sorted(_got.items())))
'''


def _channels(output: str) -> dict[str, str]:
    line = next(ln for ln in output.splitlines() if "CHANNELS " in ln)
    return dict(eval(line.split("CHANNELS ", 1)[1]))  # noqa: S307 - our own probe's repr of strings


def test_no_channel_between_workers_opens_in_a_jailed_worker(lab, arena):
    sub = lab(files={"context": hostile("context", arena, end=PROBE)})
    g = judge(sub, ["context", "additive"], QUICK)
    got = _channels(g.output)
    assert set(got) >= {"shmget", "msgget", "semget", "mq_open", "flock", "lockf", "getlk", "fadvise", "readahead",
                        "inotify", "mincore", "posix_shm", "setaffinity", "getaffinity_other", "getpgid_other",
                        "getsid_other", "getpriority_other", "sched_param_other", "futex_shared_wake", "sysinfo", "madvise_pageout", "madvise_willneed", "preadv2_nowait",
                        "mlock", "meminfo"}
    assert got.pop("futex_private_wake") == "ok"  # a process's own locks still work
    opened = {k: v for k, v in got.items() if v == "ok"}
    assert not opened, f"channels a worker could open: {opened}"
    full_marks(g, "context", "additive")  # refusing the channels costs honest code nothing
    arena.assert_unharmed(g.everything)


def test_the_worker_cannot_open_a_socket(lab, arena):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    call = f'''
        _payload()
        import socket as _socket
        for _try in (
            lambda: _socket.create_connection(("127.0.0.1", {port}), timeout=1).sendall(b"LEAK"),
            lambda: _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM).sendto(b"LEAK", ("127.0.0.1", {port})),
            lambda: _socket.socket(_socket.AF_UNIX).connect("\\0attnlab-redteam"),
            lambda: _socket.socket(_socket.AF_INET6).connect(("::1", {port})),
        ):
            try:
                _try()
                print("SOCKET-OPENED")
            except OSError:
                pass
    '''
    try:
        g = judge(lab(files={"context": hostile("context", arena, call=call)}), ["context", "luong"])
        listener.settimeout(0.2)
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()
    full_marks(g, "context", "luong")
    assert "SOCKET-OPENED" not in g.output
    arena.assert_unharmed(g.everything)


URING_SOCKET = '''
    _payload()

    def _uring_socket(family, stype):
        """A socket made by io_uring (IORING_OP_SOCKET), never by the socket() syscall: its fd, or -errno."""
        import ctypes, mmap
        libc = ctypes.CDLL(None, use_errno=True)

        def _off(names):
            return [(n, ctypes.c_uint32) for n in names] + [("user_addr", ctypes.c_uint64)]

        class SqOff(ctypes.Structure):
            _fields_ = _off(("head", "tail", "ring_mask", "ring_entries", "flags", "dropped", "array", "resv1"))

        class CqOff(ctypes.Structure):
            _fields_ = _off(("head", "tail", "ring_mask", "ring_entries", "overflow", "cqes", "flags", "resv1"))

        class Params(ctypes.Structure):
            _fields_ = [("sq_entries", ctypes.c_uint32), ("cq_entries", ctypes.c_uint32), ("flags", ctypes.c_uint32),
                        ("sq_thread_cpu", ctypes.c_uint32), ("sq_thread_idle", ctypes.c_uint32),
                        ("features", ctypes.c_uint32), ("wq_fd", ctypes.c_uint32), ("resv", ctypes.c_uint32 * 3),
                        ("sq_off", SqOff), ("cq_off", CqOff)]

        p = Params()
        ring = libc.syscall(425, 4, ctypes.byref(p))  # io_uring_setup (the same number on x86_64 and aarch64)
        if ring < 0:
            return -ctypes.get_errno()
        rw = mmap.PROT_READ | mmap.PROT_WRITE
        sq = mmap.mmap(ring, p.sq_off.array + p.sq_entries * 4, mmap.MAP_SHARED, rw, offset=0)
        cq = mmap.mmap(ring, p.cq_off.cqes + p.cq_entries * 16, mmap.MAP_SHARED, rw, offset=0x8000000)
        sqes = mmap.mmap(ring, p.sq_entries * 64, mmap.MAP_SHARED, rw, offset=0x10000000)
        u32 = lambda m, off: ctypes.c_uint32.from_buffer(m, off)
        sqe = bytearray(64)
        sqe[0] = 45  # IORING_OP_SOCKET
        sqe[4:8] = family.to_bytes(4, "little")  # the fd field holds the domain
        sqe[8:16] = stype.to_bytes(8, "little")  # the off field holds the type
        sqes[0:64] = bytes(sqe)
        tail = u32(sq, p.sq_off.tail)
        u32(sq, p.sq_off.array + 4 * (tail.value & u32(sq, p.sq_off.ring_mask).value)).value = 0
        tail.value += 1
        libc.syscall(426, ring, 1, 1, 1, None, 0)  # io_uring_enter, waiting for the completion
        head = u32(cq, p.cq_off.head).value
        return ctypes.c_int32.from_buffer(cq, p.cq_off.cqes + 16 * (head & u32(cq, p.cq_off.ring_mask).value) + 8).value

    import socket as _socket
    for _family, _type in ((_socket.AF_UNIX, _socket.SOCK_STREAM), (_socket.AF_INET, _socket.SOCK_STREAM)):
        try:
            _fd = _uring_socket(int(_family), int(_type))
        except Exception as _e:
            _fd = repr(_e)
        if isinstance(_fd, int) and _fd >= 0:
            print("SOCKET-OPENED", _family.name, _fd)
            _os.close(_fd)
'''


def test_io_uring_cannot_make_a_socket_in_the_worker(lab, arena):
    # as root the worker's network namespace leaves the socket nothing to reach; run as a user (a Classroom
    # runner) there is no namespace, and only the socket() rule stood between the worker and the network
    g = judge(lab(files={"context": hostile("context", arena, call=URING_SOCKET)}), ["context"])
    full_marks(g, "context")
    arena.assert_unharmed(g.everything)
    assert "SOCKET-OPENED" not in g.output, re.findall(r"SOCKET-OPENED .*", g.output)[:2]


NOISY_STUDENT = '''
    _payload()
    import sys as _sys
    print("Total: 68/68\\n::error::fake")
    _sys.stdout.write("x" * 2_000_000)
    for _fd in range(3, 21):
        try:
            _os.write(_fd, b"\\x00" * 8 + b"junk")
        except OSError:
            pass
    if alpha.size(0) == 1:
        _os._exit(0)
    if encoder_outputs.size(1) == 1:
        raise KeyboardInterrupt
'''


def test_a_hostile_student_in_a_batch_leaves_the_next_students_full_marks(lab, arena, tmp_path, monkeypatch):
    evil = lab(files={"context": hostile("context", arena, call=NOISY_STUDENT)})
    honest = [lab(), lab()]
    rows = run_batch([evil, *honest], ["context", "luong"], tmp_path, monkeypatch, LOOSE)
    for sub in honest:
        row = rows[sub.name]
        assert row["status"] == "ok" and int(row["total"]) == FULL["context"] + FULL["luong"], row
    assert rows[evil.name]["status"] == "ok" and int(rows[evil.name]["luong"]) == FULL["luong"]
    reports = "".join(p.read_text() for p in (tmp_path / "reports").glob("*.json"))
    arena.assert_unharmed(reports)


JAIL_GAPS = '''
import ctypes as _ct
import errno as _errno
import glob as _glob
import os as _os3

_libc = _ct.CDLL(None, use_errno=True)
_libc.syscall.restype = _ct.c_long
_gaps = {}


def _nr(name):
    """The syscall's number on this machine (x86_64, aarch64)."""
    return {"x86_64": {"socketpair": 53, "connect": 42, "bind": 49, "listen": 50, "accept": 43, "accept4": 288,
                       "sendto": 44, "sendmsg": 46, "sendmmsg": 307, "memfd_create": 319, "memfd_secret": 447,
                       "io_setup": 206, "io_submit": 209, "io_getevents": 208, "io_destroy": 207},
            "aarch64": {"socketpair": 199, "connect": 203, "bind": 200, "listen": 201, "accept": 202,
                        "accept4": 242, "sendto": 206, "sendmsg": 211, "sendmmsg": 269, "memfd_create": 279,
                        "memfd_secret": 447, "io_setup": 0, "io_submit": 2, "io_getevents": 4,
                        "io_destroy": 1}}[_os3.uname().machine][name]


def _call(name, *args):
    """'refused' (EPERM: seccomp), 'ok' (it made something), or the kernel's own errno: the call reached it."""
    r = _libc.syscall(_nr(name), *args)
    if r >= 0:
        return "ok"
    e = _ct.get_errno()
    return "refused" if e == _errno.EPERM else _errno.errorcode.get(e, str(e))


_pair = (_ct.c_int * 2)()
_addr = _ct.create_string_buffer(16)  # a sockaddr_in: its family is all the kernel would read first
_addr.raw = (2).to_bytes(2, "little") + (1).to_bytes(2, "big") + bytes([127, 0, 0, 1]) + bytes(8)
_buf = _ct.create_string_buffer(64)
_ctx = _ct.c_ulong(0)
_gaps["socketpair"] = _call("socketpair", 1, 1, 0, _pair)  # AF_UNIX, SOCK_STREAM
_gaps["memfd_create"] = _call("memfd_create", b"attnlab", 0)
_gaps["memfd_secret"] = _call("memfd_secret", 0)
_gaps["io_setup"] = _call("io_setup", 8, _ct.byref(_ctx))
# on a descriptor that is none (-1): the kernel would answer EBADF, seccomp answers EPERM first
_gaps["connect"] = _call("connect", -1, _addr, 16)
_gaps["bind"] = _call("bind", -1, _addr, 16)
_gaps["listen"] = _call("listen", -1, 8)
_gaps["accept"] = _call("accept", -1, None, None)
_gaps["accept4"] = _call("accept4", -1, None, None, 0)
_gaps["sendto_address"] = _call("sendto", -1, _buf, 1, 0, _addr, 16)
_gaps["sendto_fastopen"] = _call("sendto", -1, _buf, 1, 0x20000000, None, 0)
_gaps["sendmsg"] = _call("sendmsg", -1, _buf, 0)
_gaps["sendmmsg"] = _call("sendmmsg", -1, _buf, 1, 0)
_gaps["io_submit"] = _call("io_submit", _ct.c_ulong(12345), 1, _buf)
_gaps["io_getevents"] = _call("io_getevents", _ct.c_ulong(12345), 0, 1, _buf, None)
_gaps["send_plain"] = _call("sendto", -1, _buf, 1, 0, None, 0)  # the worker's own send(): reaches the kernel


def _read(path):
    try:
        with open(path) as f:
            return "ok" if f.read(64) is not None else "ok"
    except OSError as e:
        return _errno.errorcode.get(e.errno, str(e.errno))


_gaps["cpuinfo"] = _read("/proc/cpuinfo")
# the idle-state counters of every CPU, named without a listing (which Landlock would refuse first)
_idle = [f"/sys/devices/system/cpu/cpu{c}/cpuidle/state{s}/{f}" for c in range(4) for s in range(4)
         for f in ("usage", "time")]
_got = [_read(p) for p in _idle]
_gaps["cpuidle"] = "ok" if "ok" in _got else sorted(set(_got))[0]
_gaps["cpu_listing"] = "ok" if _os3.path.isdir("/sys/devices/system/cpu") and _glob.glob("/sys/devices/system/cpu/*") else "refused"
print("JAILGAPS " + repr(sorted(_gaps.items())))
'''


def test_socketpair_memfd_aio_reconnects_and_the_machines_cpu_counters_are_closed_to_a_worker(lab, arena):
    sub = lab(files={"context": hostile("context", arena, end=JAIL_GAPS)})
    g = judge(sub, ["context", "additive"], QUICK)
    line = next(ln for ln in g.output.splitlines() if "JAILGAPS " in ln)
    got = dict(eval(line.split("JAILGAPS ", 1)[1]))  # noqa: S307 - our own probe's repr of strings
    assert got.pop("send_plain") == "EBADF"  # a plain send() still reaches the kernel: the worker's own channel
    refused = {"socketpair", "memfd_create", "memfd_secret", "io_setup", "io_submit", "io_getevents", "connect",
               "bind", "listen", "accept", "accept4", "sendto_address", "sendto_fastopen", "sendmsg", "sendmmsg"}
    gpu = bool(jail.gpu_devices())  # CUDA's driver needs memfd_create and reads the CPUs' description: they stay
    if gpu:
        refused.discard("memfd_create")
    assert {k: v for k, v in got.items() if k in refused and v != "refused"} == {}
    if not gpu:  # Landlock: neither is on the worker's list (EACCES), whatever this machine has of them (ENOENT)
        assert got["cpuinfo"] in ("EACCES", "ENOENT") and got["cpuidle"] in ("EACCES", "ENOENT"), got
        assert got["cpu_listing"] == "refused", got
    full_marks(g, "context", "additive")  # closing them costs honest code nothing
    arena.assert_unharmed(g.everything)
