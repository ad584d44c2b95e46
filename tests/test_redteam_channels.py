"""Red team, round two: no channel between workers, no lab code that solves a piece inside any worker, and no host
secret in a worker's environment. Each hostile file reports what it managed in its printed output; the tests
assert that every attempt was refused and that the honest score stands."""
from __future__ import annotations

import json
import os

import pytest

from conftest import QUICK, REFERENCE
from test_redteam import Arena, arena, full_marks, hostile, judge  # noqa: F401 - arena is a fixture

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


@pytest.mark.parametrize("module", ["grader.baseline", "grader.luong_model", "grader.train", "grader.evaluate",
                                    "grader.toy", "grader.submission", "grader.plots"])
def test_no_lab_module_that_solves_a_piece_is_in_or_importable_from_a_worker(lab, arena, module):
    probe = f'''
import sys as _sys
try:
    import {module} as _m
    _where = "imported " + str(getattr(_m, "__file__", "?"))
except BaseException as _e:
    _where = "refused " + type(_e).__name__
print("LABMOD " + repr(({module!r}, {module!r} in _sys.modules, _where)))
'''
    sub = lab(files={"encoder": hostile("encoder", arena, end=probe)})
    g = judge(sub, ["encoder"], QUICK)
    line = next(ln for ln in g.output.splitlines() if "LABMOD " in ln)
    name, loaded, where = eval(line.split("LABMOD ", 1)[1])  # noqa: S307
    assert not loaded and where.startswith("refused"), (name, loaded, where)


def test_borrowing_the_lab_encoder_earns_the_encoder_nothing(lab, arena):
    steal = """import sys as _s
for _n in ("grader.baseline", "grader.luong_model"):
    _m = _s.modules.get(_n)
    if _m is not None and hasattr(_m, "Encoder"):
        return _m.Encoder.forward(self, src)
raise NotImplementedError("piece 'encoder': nothing to borrow")
"""
    g = judge(lab(files={"encoder": hostile("encoder", arena, call=steal)}), ["encoder"], QUICK)
    assert g.score("encoder") == 0, g.messages("encoder")
    arena.assert_unharmed(g.everything)


def test_a_worker_sees_no_host_secret_in_its_environment(lab, arena, monkeypatch):
    from test_redteam import shared_zygote  # noqa: F401

    monkeypatch.setenv("GITHUB_TOKEN", "ghp_attnlab_canary_token")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "attnlab-canary-aws")
    probe = 'import os as _o\nprint("ENV " + repr(sorted(_o.environ)))\nraise RuntimeError(repr(dict(_o.environ)))'
    sub = lab(files={"context": hostile("context", arena, end=probe)})
    g = judge(sub, ["context"], QUICK, fresh=True)  # a fresh grade: its worker server starts under this environment
    assert "canary" not in g.everything
    names = eval(next(ln for ln in g.output.splitlines() if "ENV " in ln).split("ENV ", 1)[1])  # noqa: S307
    assert not {"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "HOME", "USER"} & set(names), names
    assert json.dumps(g.report)  # the report is still a report
    assert os.environ["GITHUB_TOKEN"]  # the grader's own environment is untouched


def test_the_plots_run_student_code_in_the_jail(lab, arena, tmp_path, monkeypatch):
    from grader import plots

    monkeypatch.setenv(plots.STEPS_ENV, "30")
    steal = f'''
_payload()
try:
    _leak = open({str(REFERENCE / "decoder.py")!r}).read()[:40]
except OSError as _e:
    _leak = "refused " + type(_e).__name__
print("PLOTREAD " + repr(_leak))
'''
    sub = lab(files={"encoder": hostile("encoder", arena, end=steal)})
    pngs = plots.main(submission=sub, out=tmp_path / "out", timeout=600)
    assert all(p.is_file() for p in pngs)  # the honest part of the file still trains and draws
    arena.assert_unharmed()  # nothing written, spawned or signalled from the plots' workers


def test_a_thread_bomb_stops_at_the_workers_own_limit_and_costs_the_neighbour_nothing(lab, arena):
    bomb = """
import threading as _th
_stop = _th.Event()
_n = 0
_th.stack_size(65536)
try:
    for _ in range(5000):
        _th.Thread(target=_stop.wait, daemon=True).start()
        _n += 1
except RuntimeError:
    pass
print("THREADS " + str(_n))
_stop.set()
"""
    g = judge(lab(files={"encoder": hostile("encoder", arena, end=bomb)}), ["encoder", "context"], QUICK)
    started = int(next(ln for ln in g.output.splitlines() if "THREADS " in ln).split("THREADS ", 1)[1])
    assert started < 300, f"a worker started {started} threads"  # the jail's limit is 256 tasks
    full_marks(g, "encoder", "context")
    arena.assert_unharmed(g.everything)


def test_a_compressed_answer_frame_is_refused_before_it_is_opened():
    import io
    import zipfile

    import torch

    from grader.worker import wire

    buf = io.BytesIO()
    torch.save({"__kind__": "list", "items": []}, buf)
    plain = buf.getvalue()
    wire._stored_only(plain, wire.MAX_FRAME)  # what torch.save writes is opened
    packed = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(plain)) as src, zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
    with pytest.raises(wire.WireError, match="compressed"):
        wire._stored_only(packed.getvalue(), wire.MAX_FRAME)
    r, w = os.pipe()
    os.write(w, wire.HEADER.pack(len(packed.getvalue())) + packed.getvalue())
    os.close(w)
    with pytest.raises(wire.WireError):
        wire.recv(r)
    os.close(r)


def _worker_cgroups() -> set[str]:
    from grader.worker.jail import _roots

    found = set()
    for root in _roots():
        top = os.path.join(root, "attnlab")
        if os.path.isdir(top):
            found |= {os.path.join(top, n) for n in os.listdir(top) if n.startswith("w")}
    return found


def test_a_graded_piece_leaves_no_cgroup_behind(lab, arena):
    before = _worker_cgroups()
    g = judge(lab(files={"context": hostile("context", arena, call="_payload()\n")}), ["context"], QUICK)
    full_marks(g, "context")
    assert _worker_cgroups() - before == set()
